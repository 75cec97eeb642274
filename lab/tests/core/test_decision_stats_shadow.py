"""Shadow decisions in the decision counts: ``stats()``, ``causalcache report`` (decision_counts)."""

from __future__ import annotations

import warnings

import pytest

from causalcache_lab.learn.threads import shadow_disagrees
from causalcache_memory import Action, Trace
from causalcache_memory.allocation import RandomAllocator, RecentAllocator
from causalcache_memory.allocation.explore import ExploringAllocator, explores
from causalcache_memory.archive import LocalArchive
from causalcache_memory.cli.report import counts_line
from causalcache_memory.controller import MemoryController
from causalcache_memory.decisions.stats import COMPARE_DOCS, DecisionMonitor, DecisionStats
from causalcache_memory.errors import CausalCacheWarning
from causalcache_memory.policy import Generation


class _BackPolicy:
    name = "back"

    def generate(self, prompt) -> Generation:
        return Generation(response="Action: back", action=Action("back"))


class _Broken:
    name = "broken"
    uses_witness = False

    def allocate(self, ctx):
        raise RuntimeError("scorer file vanished")


def _record(t: int, selected: list[int], **extra) -> dict:
    return {"t": t, "budget": 4, "k": 0, "allocator": "selector", "selected": selected, **extra}


def test_records_count_shadow_decisions_disagreements_and_missing_shadows() -> None:
    records = [
        _record(6, [2, 3, 4, 5], shadow_selected=[5, 4, 3, 2]),  # same set, another order: agrees
        _record(7, [3, 4, 5, 6], shadow_selected=[1, 4, 5, 6]),  # differs
        _record(8, [4, 5, 6, 7], shadow_selected=None),  # failed or skipped
        _record(9, [5, 6, 7, 8]),  # recorded without shadow: not counted either way
    ]
    stats = DecisionStats.from_records(records)
    assert (stats.decisions, stats.shadow, stats.shadow_disagreed, stats.shadow_missing) == (4, 2, 1, 1)
    assert stats.to_dict()["shadow_disagreed"] == 1 and stats.copy() == stats
    assert counts_line(stats).endswith("· shadow differs on 1 of 2 (1 missing)")


def test_a_thread_without_shadow_decisions_prints_no_shadow_counts() -> None:
    stats = DecisionStats.from_records([_record(6, [2, 3, 4, 5]), _record(7, [3, 4, 5, 6])])
    assert (stats.shadow, stats.shadow_missing) == (0, 0) and "shadow" not in counts_line(stats)


def _run(tmp_path, allocator, make_png, episodes: int = 6, steps: int = 9, monitor=None):
    archive = LocalArchive(tmp_path / "a")
    monitor = monitor or DecisionMonitor(enabled=False)
    ctl = MemoryController(
        policy=_BackPolicy(), archive=archive, allocator=allocator, budget=4, monitor=monitor
    )
    shots = [archive.put(make_png((0, j * 20, 0))).sha256 for j in range(steps + 1)]
    records: dict[str, list[dict]] = {}
    for e in range(episodes):
        episode = f"thread-{e}"
        trace = Trace("goal", episode_id=episode)
        trace.observe(shots[0])
        for sha in shots[1:]:
            records.setdefault(episode, []).append(ctl.decide(trace).to_record())
            trace.record(Action("back"), "r", sha)
    return monitor, records


def test_live_counts_of_a_shadowed_memory_equal_the_counts_of_its_records(tmp_path, make_png) -> None:
    # Recent-B against Random exact-B: their sets differ once a swap is possible, whichever arm runs
    allocator = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=2), share=0.5, seed=0, shadow=True)
    monitor, records = _run(tmp_path, allocator, make_png)
    assert {explores(e, share=0.5, seed=0) for e in records} == {True, False}  # both arms ran
    live = monitor.stats()
    for episode, log in records.items():
        counted = DecisionStats.from_records(log)
        assert live[episode] == counted
        assert counted.shadow == len(log) and counted.shadow_missing == 0
        assert 0 < counted.shadow_disagreed <= sum(1 for r in log if r["t"] >= 6)  # t - 1 > B = 4


def test_identical_arms_never_disagree_and_a_failing_shadow_counts_as_missing(tmp_path, make_png) -> None:
    same = ExploringAllocator(RecentAllocator(), RecentAllocator(), share=0.5, shadow=True)
    monitor, _ = _run(tmp_path / "same", same, make_png, episodes=3)
    assert all(s.shadow > 0 and s.shadow_disagreed == 0 for s in monitor.stats().values())
    broken = ExploringAllocator(RecentAllocator(), _Broken(), share=1e-9, shadow=True)
    monitor, records = _run(tmp_path / "broken", broken, make_png, episodes=2)
    for episode, stats in monitor.stats().items():
        assert (stats.shadow, stats.shadow_missing) == (0, len(records[episode]))


def test_selectors_that_never_disagree_are_warned_about_once(tmp_path, make_png, caplog) -> None:
    # 4 episodes x 4 decisions that could swap (t = 6..9) = 16 shadowed decisions, all the same set
    same = ExploringAllocator(RecentAllocator(), RecentAllocator(), share=0.5, shadow=True)
    monitor = DecisionMonitor(no_swap_window=10)
    with pytest.warns(CausalCacheWarning, match="chose the same set on all 10 decisions") as caught:
        _run(tmp_path, same, make_png, episodes=4, monitor=monitor)
    assert len(caught) == 1 and COMPARE_DOCS in str(caught[0].message)
    assert monitor.warned_shadow is not None and monitor.warned is None  # its own slot
    assert "nothing to judge" in caplog.text  # also a WARNING record on the logger


@pytest.mark.parametrize("arms", ["differ", "no_shadow"])
def test_no_never_disagree_warning_when_the_arms_differ_or_nothing_is_shadowed(
    tmp_path, make_png, arms
) -> None:
    other = RandomAllocator(seed=2) if arms == "differ" else RecentAllocator()
    allocator = ExploringAllocator(RecentAllocator(), other, share=0.5, shadow=arms == "differ")
    monitor = DecisionMonitor(no_swap_window=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalCacheWarning)
        _run(tmp_path, allocator, make_png, episodes=4, monitor=monitor)
    assert monitor.warned_shadow is None


def test_a_comparison_step_that_fell_back_to_recent_b_counts_its_shadow_as_missing(
    tmp_path, make_png
) -> None:
    # the arm the episode runs raises, so the controller falls back to Recent-B: neither arm's set was
    # decided, the record says shadow_selected: null, and the counts and `causalcache compare` agree on it
    broken = ExploringAllocator(_Broken(), RecentAllocator(), share=1e-9, shadow=True)
    with pytest.warns(CausalCacheWarning, match="falling back to Recent-B"):
        monitor, records = _run(tmp_path, broken, make_png, episodes=2)
    for episode, log in records.items():
        assert all(r["fallback"] and r["shadow_selected"] is None for r in log)
        assert monitor.stats()[episode] == DecisionStats.from_records(log)
        assert (monitor.stats()[episode].shadow, monitor.stats()[episode].shadow_missing) == (0, len(log))
        assert shadow_disagrees(log) is None  # compare: this episode lacks shadow decisions


def test_a_fallback_without_a_comparison_records_no_shadow(tmp_path, make_png) -> None:
    with pytest.warns(CausalCacheWarning, match="falling back to Recent-B"):
        monitor, records = _run(tmp_path, _Broken(), make_png, episodes=1)
    assert all("shadow_selected" not in r for log in records.values() for r in log)
    assert all(s.shadow_missing == 0 for s in monitor.stats().values())
