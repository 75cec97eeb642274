"""learn warns when a Recent-B-only recording is labelled against its recorded actions (RESULTS.md 9, 9h)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from causalcache_lab.learn.recording_check import recording_warning


def _trajs(*allocators):  # type: ignore[no-untyped-def]
    return [SimpleNamespace(metadata={"allocators": list(a)}) for a in allocators]


def _config(reference="recorded", sources=("teacher_forced",)):  # type: ignore[no-untyped-def]
    return SimpleNamespace(labels=SimpleNamespace(reference=reference), sources={s: 1.0 for s in sources})


def test_a_recent_b_only_recording_with_recorded_targets_is_warned_about(caplog) -> None:
    with caplog.at_level("WARNING", logger="causalcache_lab.learn"):
        message = recording_warning(_trajs(["recent"], ["recent"]), _config())
    assert message and "all 2 kept episodes ran Recent-B alone" in message
    assert "labels.reference: full_history" in message and message in caplog.text
    assert recording_warning(_trajs(["recent"]), _config(sources=("agreement",))) is not None


@pytest.mark.parametrize(
    ("trajs", "config"),
    [
        (_trajs(["recent"], ["random", "recent"]), _config()),  # one episode explored
        (_trajs(["selector"]), _config()),  # recorded with the selector deployed
        (_trajs(["recent"]), _config(reference="full_history")),  # a target that labels soundly
        (_trajs(["recent"]), _config(sources=("evidence",))),  # evidence labels score no action
        (_trajs([]), _config()),  # a dataset without allocator records: nothing is known
        ([], _config()),
    ],
)
def test_no_warning_when_the_recording_or_the_target_can_show_a_gain(trajs, config) -> None:
    assert recording_warning(trajs, config) is None
