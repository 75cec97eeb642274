"""PostgresSaver: run with CAUSALCACHE_POSTGRES_URI set (see docs/LANGGRAPH.md)."""

from __future__ import annotations

import os
import uuid

import pytest
from lg_graphs import build_loop, run_config
from lg_support import KeyPolicy, PromoteKeyOnWitness, Screens, screen_png

from causalcache_memory.config import CausalCacheConfig
from causalcache_memory.integrations.langgraph import CausalCacheMemory, find_image_data

URI = os.environ.get("CAUSALCACHE_POSTGRES_URI")
pytestmark = [
    pytest.mark.postgres,
    pytest.mark.service("postgres"),
    pytest.mark.skipif(not URI, reason="set CAUSALCACHE_POSTGRES_URI to run the PostgreSQL tests"),
]


def _memory(archive) -> CausalCacheMemory:
    key = archive.put(screen_png(1, key=True)).sha256
    config = CausalCacheConfig(checkpointer={"kind": "postgres", "uri": URI})
    return CausalCacheMemory(
        budget=2,
        config=config,
        policy=KeyPolicy(),
        archive=archive,
        allocation=PromoteKeyOnWitness(lambda: key),
    )


def test_postgres_episode_resumes_from_checkpoint(archive):
    pytest.importorskip("langgraph.checkpoint.postgres")
    cfg = run_config(f"pg-{uuid.uuid4().hex[:12]}")
    screens = Screens()
    memory = _memory(archive)
    saver = memory.checkpointer()
    graph = build_loop(memory, screens, steps=6, checkpointer=saver, interrupt_before=["act"])
    graph.invoke({"goal": "g", "steps": 0}, cfg)
    graph.invoke(None, cfg)
    saver.conn.close()  # the first process goes away; a new one resumes from PostgreSQL
    memory2 = _memory(archive)
    saver2 = memory2.checkpointer()
    try:
        graph2 = build_loop(memory2, screens, steps=6, checkpointer=saver2, interrupt_before=["act"])
        while graph2.get_state(cfg).next:
            graph2.invoke(None, cfg)
        log = memory2.episode_log(graph2, cfg)
        assert [r["t"] for r in log] == list(range(1, 7))
        assert [r["t"] for r in log if r["second_pass"]] == [4, 5, 6]
        assert find_image_data(graph2.get_state(cfg).values) == []
    finally:
        saver2.conn.close()


def test_async_postgres_saver_runs_the_async_user_agent(tmp_path):
    pytest.importorskip("langgraph.checkpoint.postgres.aio")
    import asyncio

    import user_agent as ua

    config = CausalCacheConfig(checkpointer={"kind": "postgres", "uri": URI})
    memory = CausalCacheMemory(
        config=config, budget=2, allocation="recent", archive=ua.LocalArchive(tmp_path)
    )
    thread = f"pg-async-{uuid.uuid4().hex[:12]}"

    async def main():
        async with memory.acheckpointer() as saver:
            graph = ua.build_agent(memory, steps=8, checkpointer=saver, use_async=True)
            await graph.ainvoke(ua.first_input(), ua.run_config(thread))
            return await memory.atrace(graph, ua.run_config(thread))

    trace = asyncio.run(main())
    unparsed = [t for t in range(1, 9) if ua.reply_for(t) in (ua.UNPARSEABLE, ua.MALFORMED)]
    assert len(trace) == 8 and [e.index for e in trace.events if e.unparsed] == unparsed == [3, 5]
