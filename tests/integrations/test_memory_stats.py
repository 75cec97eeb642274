"""``CausalCacheMemory.stats()`` and ``causalcache report``: per-thread decision counts (issue 24)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import user_agent as ua

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.allocation.base import make_allocation, recent_b
from causalcache_memory.cli.main import main
from causalcache_memory.decisions.stats import DecisionStats
from causalcache_memory.errors import CausalCacheWarning


class ScriptedAllocator:
    """t % 3 == 1: swap event 1 in; t % 3 == 2: decline as "ood"; t == 9: fail; else Recent-B."""

    name = "scripted"
    uses_witness = True

    def allocate(self, ctx):
        recent = list(recent_b(ctx.t, ctx.budget))
        if ctx.t == 9:
            raise RuntimeError("scorer crashed")
        if ctx.t % 3 == 1 and recent and 1 not in recent:
            recent[0] = 1
        info = {"fallback": "ood"} if ctx.t % 3 == 2 else {}
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name, info=info)


def _counts(log: list[dict]) -> tuple[int, int, int, dict]:
    """Counted here from the raw records, independently of DecisionStats."""
    fallbacks = Counter(
        "error" if "failed" in r["fallback"] else r["fallback"] for r in log if r["fallback"] is not None
    )
    return len(log), sum(r["k"] > 0 for r in log), sum(bool(r["second_pass"]) for r in log), dict(fallbacks)


def _stats_tuple(stats: DecisionStats) -> tuple[int, int, int, dict]:
    return stats.decisions, stats.swaps, stats.second_passes, stats.fallbacks


def test_stats_match_the_decision_records_of_a_langgraph_run(tmp_path, capsys):
    memory = ua.memory_for(str(tmp_path), allocation=ScriptedAllocator())
    graph = ua.build_agent(memory, steps=14, checkpointer=memory.checkpointer())
    with pytest.warns(CausalCacheWarning, match="scorer crashed; falling back to Recent-B for step 9"):
        graph.invoke(ua.first_input(), ua.run_config("s1"))
    other = ua.build_agent(memory, steps=3, checkpointer=memory.checkpointer())
    other.invoke(ua.first_input(), ua.run_config("s2"))

    log = memory.episode_log(graph, ua.run_config("s1"))
    expected = _counts(log)
    # B = 4: t = 7, 10, 13 swap (two passes each); t = 2, 5, 8, 11, 14 decline "ood"; t = 9 fails
    assert expected == (14, 3, 3, {"ood": 5, "error": 1})
    durable = memory.stats(graph, ua.run_config("s1"))  # from the thread's decision log
    assert _stats_tuple(durable) == expected
    live = memory.stats()  # this process's counters, every thread of the memory
    assert set(live) == {"s1", "s2"} and live["s1"] == durable
    assert _stats_tuple(live["s2"]) == _counts(memory.episode_log(other, ua.run_config("s2")))

    # another process (a new memory on the same archive): the durable counts, no live ones
    again = ua.memory_for(str(tmp_path), allocation=RecentAllocator())
    state = graph.get_state(ua.run_config("s1")).values
    assert again.stats(state) == durable and again.stats() == {}

    # causalcache report prints the same counts
    assert (
        main(
            [
                "report",
                "--archive",
                str(tmp_path / "archive"),
                "--thread",
                "s1",
                "--out",
                str(tmp_path / "r.html"),
            ]
        )
        == 0
    )
    line = capsys.readouterr().out.splitlines()[-1]
    assert (
        line
        == "thread 's1': decisions 14 · swaps (k > 0) 3 · pass 2 3 · Recent-B fallbacks 6 (error 1, ood 5)"
    )
    assert re.search(r"decisions 14 · swaps \(k &gt; 0\) 3 · pass 2 3", (tmp_path / "r.html").read_text())
