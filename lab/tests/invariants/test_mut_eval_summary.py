"""The closed-loop summary's selector-decline accounting (``ood_rate``, ``fallback_rate``): exact shares of
two-pass decisions, per split and overall, recomputed by hand (mutation triage, docs/mutation/eval_summary.md).
"""

from __future__ import annotations

import pytest

from causalcache_lab.eval.closed_loop import EpisodeOutcome
from causalcache_lab.eval.summary import summarize_arm


def _episode(task: str, split: str, log: list[dict]) -> EpisodeOutcome:
    return EpisodeOutcome(task, split, "causalcache", 4, True, len(log), 0.1, log=log)


def _two_pass(fallback: str | None = None) -> dict:
    record: dict = {"proposal": "tap", "k": 0, "second_pass": False}
    if fallback is not None:
        record["fallback"] = fallback
    return record


@pytest.fixture
def outcomes() -> list[EpisodeOutcome]:
    # memory-critical: 7 two-pass decisions, 2 declined as "ood", 1 other fallback; a single-pass record
    # (no proposal) is not a two-pass decision and must not enter either share
    memory = _episode(
        "m1",
        "memory_critical",
        [
            _two_pass("ood"),
            _two_pass(None),
            _two_pass("ood"),
            _two_pass("allocator 'causalcache' exceeded 250 ms"),
            _two_pass(None),
            _two_pass(None),
            _two_pass(None),
            {"k": 0},
        ],
    )
    # control: 3 two-pass decisions, 1 "ood", 2 errors
    control = _episode(
        "c1",
        "control",
        [_two_pass("ood"), _two_pass("allocator failed: ValueError"), _two_pass("allocator is busy")],
    )
    return [memory, control]


def test_ood_and_other_fallback_shares_are_exact_per_split(outcomes) -> None:
    out = summarize_arm(outcomes)
    assert out["memory_critical"]["ood_rate"] == pytest.approx(2 / 7)
    assert out["memory_critical"]["fallback_rate"] == pytest.approx(1 / 7)
    assert out["control"]["ood_rate"] == pytest.approx(1 / 3)
    assert out["control"]["fallback_rate"] == pytest.approx(2 / 3)
    assert out["all"]["ood_rate"] == pytest.approx(3 / 10)
    assert out["all"]["fallback_rate"] == pytest.approx(3 / 10)
    assert out["ood_rate"] == pytest.approx(3 / 10) and out["fallback_rate"] == pytest.approx(3 / 10)


def test_no_two_pass_decision_means_no_rate() -> None:
    single = [_episode("m1", "memory_critical", [{"k": 0}, {"k": 1}])]
    out = summarize_arm(single)
    assert out["memory_critical"]["ood_rate"] is None and out["memory_critical"]["fallback_rate"] is None
    assert out["ood_rate"] is None
