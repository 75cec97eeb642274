"""Node form on real LangGraph: two-pass re-decision, stream events, episode log, fallbacks, errors."""

from __future__ import annotations

import pytest
from lg_graphs import LoopState, build_loop, run_config
from lg_support import FailingAllocation, KeyPolicy, PromoteKeyOnWitness, Screens, relaxed_config, screen_png

from causalcache_memory.allocation import RecentAllocator, recent_b
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import CausalCacheWarning, PromptImageError, TraceError
from causalcache_memory.integrations.langgraph import (
    STEP_EVENT,
    CausalCacheContext,
    CausalCacheMemory,
    find_image_data,
)

STEPS, BUDGET = 7, 2


def _key_sha(archive: LocalArchive) -> str:
    return archive.put(screen_png(1, key=True)).sha256


def _memory(archive, allocation, policy=None, budget=BUDGET):
    return CausalCacheMemory(
        config=relaxed_config(), budget=budget, policy=policy, archive=archive, allocation=allocation
    )


def test_two_pass_fires_exactly_when_a_recent_step_is_displaced(archive, saver_factory):
    policy = KeyPolicy()
    key = _key_sha(archive)
    memory = _memory(archive, PromoteKeyOnWitness(lambda: key), policy)
    screens = Screens()
    graph = build_loop(memory, screens, steps=STEPS, checkpointer=saver_factory())
    events = []
    for mode, chunk in graph.stream(
        {"goal": "find the key", "steps": 0}, run_config(), stream_mode=["custom", "values"]
    ):
        if mode == "custom":
            events.append(chunk)

    log = memory.episode_log(graph, run_config())
    assert log == events and [r["t"] for r in log] == list(range(1, STEPS + 1))
    for record in log:
        t = record["t"]
        displaced = t - 1 > BUDGET  # key event 1 left Recent-B
        assert record["event"] == STEP_EVENT
        assert record["second_pass"] is displaced
        assert len(record["pass_latency_ms"]) == (2 if displaced else 1)
        assert record["recent"] == list(recent_b(t, BUDGET))
        if displaced:
            assert record["selected"] == [1, *record["recent"][1:]] and record["k"] == 1
            assert record["proposal"]["target"] == "want-key"
            assert record["action"]["target"] == "found-key"  # a2 replaces a1
        else:
            assert record["k"] == 0 and record["selected"] == record["recent"]
            assert record["action"]["target"] == ("want-key" if t == 1 else "found-key")
    # the executed actions are the emitted ones, and every pass was a real model call
    assert [a["target"] for a in screens.actions] == [r["action"]["target"] for r in log]
    assert len(policy.calls) == STEPS + sum(r["second_pass"] for r in log)
    trace = memory.trace(graph, run_config())
    # the last action awaits its post-action screen: pending, not yet an event
    assert len(trace) == STEPS - 1 and trace.event(1).screenshot == key
    state = graph.get_state(run_config()).values
    assert state["cc_pending"]["t"] == STEPS and memory.action(state).target == log[-1]["action"]["target"]


def test_witness_free_policy_runs_a_single_pass(archive, saver_factory):
    policy = KeyPolicy()
    memory = _memory(archive, RecentAllocator(), policy)
    graph = build_loop(memory, Screens(), steps=5, checkpointer=saver_factory())
    graph.invoke({"goal": "g", "steps": 0}, run_config())
    log = memory.episode_log(graph, run_config())
    assert not any(r["second_pass"] for r in log) and len(policy.calls) == 5
    assert all("proposal" not in r for r in log)


def test_archive_and_policy_through_runtime_context(archive):
    from langgraph.checkpoint.memory import InMemorySaver

    policy = KeyPolicy()
    key = _key_sha(archive)
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=BUDGET, allocation=PromoteKeyOnWitness(lambda: key)
    )
    graph = build_loop(memory, Screens(), steps=4, checkpointer=InMemorySaver())
    context = CausalCacheContext(policy=policy, archive=archive)
    graph.invoke({"goal": "g", "steps": 0}, run_config(), context=context)
    assert len(policy.calls) == 5  # one second pass at t=4
    assert memory.trace(graph, run_config()).event(1).screenshot in archive


def test_selector_failure_falls_back_to_recent_with_warning(archive, saver_factory):
    policy = KeyPolicy()
    with pytest.warns(CausalCacheWarning, match="could not be warmed up"):  # said at construction
        memory = _memory(archive, FailingAllocation(), policy)
    graph = build_loop(memory, Screens(), steps=4, checkpointer=saver_factory())
    with pytest.warns(CausalCacheWarning, match="selector weights missing.*Recent-B"):
        graph.invoke({"goal": "g", "steps": 0}, run_config())
    log = memory.episode_log(graph, run_config())
    assert len(log) == 4 and len(policy.calls) == 4
    assert all(r["selected"] == r["recent"] and "selector weights missing" in r["fallback"] for r in log)


def test_unbuildable_allocator_falls_back_every_step(archive, monkeypatch):
    import causalcache_memory.integrations.langgraph.memory as memory_module

    def missing(cfg):
        raise ImportError("no selector package")

    # the default config asks for the learned selector; pretend it cannot be built
    monkeypatch.setattr(memory_module, "build_allocator", missing)
    policy = KeyPolicy()
    with pytest.warns(CausalCacheWarning, match="could not be built.*no selector package"):  # at once
        memory = CausalCacheMemory(config=relaxed_config(), budget=2, policy=policy, archive=archive)
    graph = build_loop(memory, Screens(), steps=4)  # no checkpointer: the log comes from the stream
    with pytest.warns(CausalCacheWarning, match="no selector package"):
        log = list(graph.stream({"goal": "g", "steps": 0}, stream_mode="custom"))
    assert len(log) == 4 and all(r["fallback"] and r["selected"] == r["recent"] for r in log)
    assert len(policy.calls) == 4


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_missing_or_corrupt_blob_names_event_and_hash(archive, damage):
    key = _key_sha(archive)
    memory = _memory(archive, RecentAllocator(), KeyPolicy(), budget=4)
    screens = Screens()
    from langgraph.checkpoint.memory import InMemorySaver

    saver = InMemorySaver()
    graph = build_loop(memory, screens, steps=3, checkpointer=saver)
    graph.invoke({"goal": "g", "steps": 0}, run_config())
    blob = archive.root / "blobs" / key[:2] / key
    if damage == "missing":
        blob.unlink()
    else:
        blob.write_bytes(screen_png(99))
    graph2 = build_loop(memory, screens, steps=5, checkpointer=saver)  # continue the same thread
    with pytest.raises(PromptImageError, match=rf"event 1 \(sha256 {key}\)"):
        graph2.invoke({"goal": "g"}, run_config())


def test_decide_before_observe_is_a_clear_error(archive):
    from langgraph.graph import END, START, StateGraph

    memory = _memory(archive, RecentAllocator(), KeyPolicy())
    builder = StateGraph(LoopState)
    builder.add_node("decide", memory.decide_node(schema=LoopState))
    builder.add_edge(START, "decide")
    builder.add_edge("decide", END)
    with pytest.raises(TraceError, match="observe node first"):
        builder.compile().invoke({"goal": "g"})


def test_state_and_checkpoints_hold_no_image_data(archive, saver_factory):
    key = _key_sha(archive)
    memory = _memory(archive, PromoteKeyOnWitness(lambda: key), KeyPolicy())
    saver = saver_factory()
    graph = build_loop(memory, Screens(), steps=8, checkpointer=saver)
    graph.invoke({"goal": "g", "steps": 0}, run_config())
    assert find_image_data(graph.get_state(run_config()).values) == []
    sizes = []
    for tup in saver.list(run_config()):
        assert find_image_data(tup.checkpoint) == [] and find_image_data(tup.pending_writes or []) == []
        sizes.append(len(saver.serde.dumps_typed(tup.checkpoint)[1]))
    assert len(sizes) > 20 and max(sizes) < 12_000  # text and hashes only (a screenshot alone is larger)


def test_image_walker_detects_pixels_in_state():
    from langchain_core.messages import HumanMessage

    png = screen_png(3)
    import base64

    url = "data:image/png;base64," + base64.b64encode(png).decode()
    state = {
        "messages": [HumanMessage(content=[{"type": "image_url", "image_url": {"url": url}}])],
        "raw": png,
    }
    hits = find_image_data(state)
    assert len(hits) == 2 and any("raw" in h for h in hits)


class SlowRecords(LocalArchive):
    """Trace-chain records take a while to write (they go through the memory's writer thread)."""

    def put_record(self, data: bytes) -> str:
        import time

        time.sleep(0.2)
        return super().put_record(data)


def test_with_another_checkpointer_each_node_returns_after_its_chain_records_are_stored(
    tmp_path, saver_factory
):
    from causalcache_memory.integrations.langgraph.context import episode_id_for_thread
    from causalcache_memory.trace.store import TraceStore

    archive = SlowRecords(tmp_path / "archive")
    memory = _memory(archive, RecentAllocator(), KeyPolicy())
    graph = build_loop(memory, Screens(), steps=2, checkpointer=saver_factory())  # a saver that never waits
    graph.invoke({"goal": "g", "steps": 0}, run_config())
    head = graph.get_state(run_config()).values["cc_head"]
    heads = TraceStore(archive).heads(head)  # a fresh store reads every record from the disk
    assert len(heads) >= 4 and set(heads) <= archive.references(episode_id_for_thread("t1"))
    memory.close()
