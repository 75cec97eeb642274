"""The feature extractor keeps each event's rows between decisions of one episode, also when the trace is
rebuilt from a store at every step (the LangGraph integration does that), and never lets another fork's
rows stand in for a trace's own."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from causalcache_memory.actions import Action
from causalcache_memory.selector import features as features_module
from causalcache_memory.selector.features import FeatureExtractor
from causalcache_memory.trace import Trace


def _sha(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


class _Texts:
    def get_text(self, sha: str) -> str | None:
        return f"Invoice {sha[:4]} total 12.50" if sha else None


STEPS = [
    (Action("click", x=0.1 * i, y=0.5), f"click item {i}", "Mail" if i % 2 else "Sheets", f"screen{i}")
    for i in range(1, 9)
]


def _trace(steps, *, goal: str = "Archive invoice 12.50", episode: str = "ep-1") -> Trace:  # type: ignore[no-untyped-def]
    trace = Trace(goal, episode_id=episode)
    trace.observe(_sha("home"))
    for i, (action, summary, app, screen) in enumerate(steps):
        trace.record(action, f"r{i}", _sha(screen), app=app, summary=summary)
    return trace


def _fresh_rows(trace: Trace, witness: Action | None) -> np.ndarray:
    return FeatureExtractor(None, screen_text=_Texts())(trace, 2, witness)


@pytest.fixture
def extended_rows(monkeypatch):  # type: ignore[no-untyped-def]
    """How many event rows the extractors computed (each call of ``_extend`` adds ``len(new)``)."""
    counted = [0]
    original = FeatureExtractor._extend

    def counting(self, st, new, images):  # type: ignore[no-untyped-def]
        counted[0] += len(new)
        return original(self, st, new, images)

    monkeypatch.setattr(FeatureExtractor, "_extend", counting)
    return counted


def test_a_trace_rebuilt_every_step_computes_each_event_once(extended_rows) -> None:
    extractor = FeatureExtractor(None, screen_text=_Texts())
    witness = Action("type", x=0.5, y=0.5, text="12.50")
    for t in range(1, len(STEPS) + 1):
        rebuilt = Trace.from_dict(_trace(STEPS[:t]).to_dict())  # a new object with equal events, as loaded
        before = extended_rows[0]
        rows = extractor(rebuilt, 2, witness)
        assert extended_rows[0] - before == 1  # only the new event's row was computed
        np.testing.assert_array_equal(rows, _fresh_rows(rebuilt, witness))


def test_a_forked_trace_of_the_same_episode_gets_its_own_rows() -> None:
    extractor = FeatureExtractor(None, screen_text=_Texts())
    extractor(_trace(STEPS), 2, None)
    fork_steps = [*STEPS[:3], (Action("scroll", x=0.5, y=0.5), "scroll down", "Sheets", "other"), *STEPS[4:]]
    fork = _trace(fork_steps)
    np.testing.assert_array_equal(extractor(fork, 2, None), _fresh_rows(fork, None))


def test_a_rewound_trace_reads_the_first_rows_of_the_longer_one(extended_rows) -> None:
    extractor = FeatureExtractor(None, screen_text=_Texts())
    extractor(_trace(STEPS), 2, None)
    shorter = _trace(STEPS[:5])
    np.testing.assert_array_equal(extractor(shorter, 2, None), _fresh_rows(shorter, None))
    assert extended_rows[0] == len(STEPS) + 5  # the extractor's 8 rows and the fresh one's 5: none again


def test_other_episodes_and_goals_do_not_share_rows() -> None:
    extractor = FeatureExtractor(None, screen_text=_Texts())
    extractor(_trace(STEPS), 2, None)
    for other in (_trace(STEPS, episode="ep-2"), _trace(STEPS, goal="Find the lamp order")):
        np.testing.assert_array_equal(extractor(other, 2, None), _fresh_rows(other, None))


def test_the_cache_keeps_at_most_its_bound_of_episodes(monkeypatch) -> None:
    monkeypatch.setattr(features_module, "CACHED_TRACES", 3)
    extractor = FeatureExtractor(None)
    for k in range(5):
        extractor(_trace(STEPS[:2], episode=f"ep-{k}"), 2, None)
    assert list(extractor._cache) == [(f"ep-{k}", "Archive invoice 12.50") for k in (2, 3, 4)]
