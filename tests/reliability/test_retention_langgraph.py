"""Retention for LangGraph deployments: thread deletion and idleness release screenshots for gc."""

from __future__ import annotations

import asyncio
import time

import pytest
from reliability_helpers import screenshot

from causalcache_memory.archive import LocalArchive
from causalcache_memory.integrations.langgraph.context import episode_id_for_thread
from causalcache_memory.integrations.langgraph.retention import (
    adelete_thread,
    delete_thread,
    release_idle_threads,
)
from causalcache_memory.trace import Trace
from causalcache_memory.trace.store import TraceStore


class RecordingSaver:
    def __init__(self) -> None:
        self.deleted: list[str] = []

    def delete_thread(self, thread_id: str) -> None:
        self.deleted.append(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        self.deleted.append(thread_id)


def _thread_with_trace(archive, thread: str, i: int) -> tuple[str, str]:
    episode = episode_id_for_thread(thread)
    sha = archive.put(screenshot(i)).sha256
    archive.retain(episode, [sha])
    trace = Trace("goal", episode_id=episode)
    trace.observe(sha)
    head = TraceStore(archive).commit(None, trace)
    return sha, head


def test_deleting_a_thread_releases_it_and_gc_collects_only_its_objects(tmp_path):
    archive = LocalArchive(tmp_path)
    gone, gone_head = _thread_with_trace(archive, "user/42 session", 1)
    kept, kept_head = _thread_with_trace(archive, "t2", 2)
    saver = RecordingSaver()
    episode = delete_thread(saver, archive, "user/42 session")
    assert saver.deleted == ["user/42 session"] and episode.startswith("thread-")
    assert archive.live_episodes() == ["t2"]
    report = archive.gc(grace_seconds=0)
    assert report.deleted == 2  # the screenshot and the trace record of the deleted thread
    assert gone not in archive and not archive.has_record(gone_head)
    assert archive.get_bytes(kept) == screenshot(2) and archive.has_record(kept_head)


def test_async_delete_and_idle_release(tmp_path):
    archive = LocalArchive(tmp_path)
    _thread_with_trace(archive, "a", 3)
    _thread_with_trace(archive, "b", 4)
    saver = RecordingSaver()
    assert asyncio.run(adelete_thread(saver, archive, "a")) == "a"
    assert release_idle_threads(archive, 3600) == []
    assert release_idle_threads(archive, 3600, now=time.time() + 7200) == ["b"]
    assert archive.live_episodes() == []


def test_real_checkpointer_thread_is_deleted(tmp_path):
    memory = pytest.importorskip("langgraph.checkpoint.memory")
    saver = memory.InMemorySaver()
    config = {"configurable": {"thread_id": "t9", "checkpoint_ns": ""}}
    from langgraph.checkpoint.base import empty_checkpoint

    saver.put(config, empty_checkpoint(), {}, {})
    assert saver.get_tuple(config) is not None
    archive = LocalArchive(tmp_path)
    _thread_with_trace(archive, "t9", 5)
    delete_thread(saver, archive, "t9")
    assert saver.get_tuple(config) is None and archive.live_episodes() == []
