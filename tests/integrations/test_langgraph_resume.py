"""Resume after interruption: same trace, archive references and allocations as an uninterrupted run."""

from __future__ import annotations

import pytest
from lg_graphs import build_loop, run_config
from lg_support import KeyPolicy, PromoteKeyOnWitness, Screens, relaxed_config, screen_png

from causalcache_memory.archive import LocalArchive
from causalcache_memory.integrations.langgraph import CausalCacheMemory

STEPS = 8
TIMING = ("pass_latency_ms", "selector_latency_ms")


def _memory(root) -> CausalCacheMemory:
    archive = LocalArchive(root)  # a fresh object on the same directory, as after a process restart
    key = archive.put(screen_png(1, key=True)).sha256
    return CausalCacheMemory(
        config=relaxed_config(),
        budget=2,
        policy=KeyPolicy(),
        archive=archive,
        allocation=PromoteKeyOnWitness(lambda: key),
    )


def _untimed(log):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in log]


def _finish(graph, config):
    while graph.get_state(config).next:
        graph.invoke(None, config)


@pytest.mark.parametrize("how", ["interrupt_before", "exception"])
def test_resume_matches_uninterrupted_episode(tmp_path, saver_factory, how):
    from langgraph.checkpoint.memory import InMemorySaver

    ref_memory = _memory(tmp_path / "ref")
    ref_graph = build_loop(ref_memory, Screens(), steps=STEPS, checkpointer=InMemorySaver())
    ref_graph.invoke({"goal": "g", "steps": 0}, run_config())
    ref_trace, ref_log = (
        ref_memory.trace(ref_graph, run_config()),
        ref_memory.episode_log(ref_graph, run_config()),
    )

    screens, cfg = Screens(), run_config()
    kw = {"interrupt_before": ["act"]} if how == "interrupt_before" else {}
    graph = build_loop(_memory(tmp_path / "run"), screens, steps=STEPS, checkpointer=saver_factory(), **kw)
    if how == "interrupt_before":
        graph.invoke({"goal": "g", "steps": 0}, cfg)
        for _ in range(3):
            graph.invoke(None, cfg)
    else:
        screens.fail_at = 5
        with pytest.raises(ConnectionError):
            graph.invoke({"goal": "g", "steps": 0}, cfg)
    assert 0 < len(screens.actions) < STEPS
    del graph  # everything but the environment and the storage is rebuilt

    memory = _memory(tmp_path / "run")
    graph = build_loop(memory, screens, steps=STEPS, checkpointer=saver_factory(), **kw)
    _finish(graph, cfg)

    trace = memory.trace(graph, cfg)
    assert trace.to_dict() == ref_trace.to_dict()
    assert _untimed(memory.episode_log(graph, cfg)) == _untimed(ref_log)
    assert all(sha in memory.resolve_archive() for sha in trace.screenshots())
    assert any(r["second_pass"] for r in ref_log)  # the resumed part exercised pass 2 as well
    assert len(screens.actions) == STEPS
