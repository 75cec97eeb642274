"""Checkpoint bytes per step are O(1) in t; a cold process-free reload rebuilds the same trace and log."""

from __future__ import annotations

import sqlite3

from lg_graphs import build_loop, run_config
from lg_support import KeyPolicy, PromoteKeyOnWitness, Screens, relaxed_config, screen_png

from causalcache_memory.archive import LocalArchive
from causalcache_memory.integrations.langgraph import STATE_KEYS, CausalCacheMemory
from causalcache_memory.trace.store import TraceStore

STEPS = 40
NODES_PER_STEP = 3  # observe, decide, act


def _bytes_per_agent_step(conn: sqlite3.Connection, saver, cfg) -> dict[int, int]:
    """Checkpoint + metadata + pending-write bytes in the database, by the agent step that wrote them."""
    thread = cfg["configurable"]["thread_id"]
    sizes = dict(
        conn.execute(
            "SELECT checkpoint_id, length(checkpoint) + length(metadata) FROM checkpoints WHERE thread_id=?",
            (thread,),
        )
    )
    for cid, n in conn.execute(
        "SELECT checkpoint_id, sum(length(value)) FROM writes WHERE thread_id=? GROUP BY checkpoint_id",
        (thread,),
    ):
        sizes[cid] = sizes.get(cid, 0) + int(n or 0)
    per_step: dict[int, int] = {}
    for tup in saver.list(cfg):
        step = max(0, int(tup.metadata.get("step", -1))) // NODES_PER_STEP + 1
        cid = tup.config["configurable"]["checkpoint_id"]
        per_step[step] = per_step.get(step, 0) + sizes.get(cid, 0)
    return per_step


def test_checkpoint_bytes_are_flat_in_t_and_cold_reload_is_identical(tmp_path):
    from langgraph.checkpoint.sqlite import SqliteSaver

    archive = LocalArchive(tmp_path / "archive")
    key = archive.put(screen_png(1, key=True)).sha256
    memory = CausalCacheMemory(
        config=relaxed_config(),
        budget=2,
        policy=KeyPolicy(),
        archive=archive,
        allocation=PromoteKeyOnWitness(lambda: key),
    )
    conn = sqlite3.connect(str(tmp_path / "cp.sqlite"), check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        graph = build_loop(memory, Screens(), steps=STEPS, checkpointer=saver)
        cfg = run_config("flat")
        graph.invoke({"goal": "find the key", "steps": 0}, cfg)
        per_step = _bytes_per_agent_step(conn, saver, cfg)
        state = graph.get_state(cfg).values
        log, trace = memory.episode_log(graph, cfg), memory.trace(graph, cfg)
    finally:
        conn.close()

    assert set(STATE_KEYS) <= set(state) and not any(k in state for k in ("cc_trace", "cc_log"))
    assert all(n < 20 * 1024 for n in per_step.values()), per_step
    early = [per_step[t] for t in range(4, 8)]
    late = [per_step[t] for t in range(STEPS - 4, STEPS)]
    assert max(late) - min(early) < 256, (early, late)  # flat: no growth over 33 steps

    assert len(log) == STEPS and len(trace) == STEPS - 1 and state["cc_t"] == STEPS
    assert sum(r["second_pass"] for r in log) > 0

    # cold reload: a new archive object and an empty cache, from nothing but the state's head hash
    cold = TraceStore(LocalArchive(tmp_path / "archive"))
    assert cold.load_trace(state["cc_head"]).to_dict() == trace.to_dict()
    assert cold.load_log(state["cc_head"], episode_id=state["cc_episode"]) == log
    fresh = CausalCacheMemory(config=relaxed_config(), archive=LocalArchive(tmp_path / "archive"))
    assert fresh.episode_log(state) == log and fresh.trace(state).to_dict() == trace.to_dict()
    # every chain record is retained for the episode, so archive gc keeps the trace
    assert set(cold.heads(state["cc_head"])) <= archive.references(state["cc_episode"])
