"""Archive retention follows the checkpointer's pruning: ``prune_threads``, ``release_pruned_threads``
and ``causalcache archive gc --release-pruned`` (with tenant archives), on a real SQLite saver."""

from __future__ import annotations

import json
import os
import time

import pytest

pytest.importorskip("langgraph.checkpoint.sqlite")

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from reliability_helpers import screenshot
from typing_extensions import TypedDict

from causalcache_memory.archive import LocalArchive
from causalcache_memory.archive.namespaces import open_namespace
from causalcache_memory.cli.main import main
from causalcache_memory.config import parse_config
from causalcache_memory.integrations.langgraph.context import episode_id_for_thread
from causalcache_memory.integrations.langgraph.retention import prune_threads, release_pruned_threads
from causalcache_memory.integrations.langgraph.savers import build_checkpointer


class S(TypedDict, total=False):
    n: int


def _checkpoint(saver, thread: str) -> None:
    """One real LangGraph checkpoint of ``thread`` in ``saver``."""
    builder = StateGraph(S)
    builder.add_node("step", lambda s: {"n": s.get("n", 0) + 1})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    builder.compile(checkpointer=saver).invoke({"n": 0}, {"configurable": {"thread_id": thread}})


def _episode(archive, thread: str, i: int, *, age_s: float = 0.0) -> str:
    episode = episode_id_for_thread(thread)
    sha = archive.put(screenshot(i)).sha256
    archive.retain(episode, [sha])
    if age_s:
        past = time.time() - age_s
        os.utime(archive.root / "refs" / episode, (past, past))
    return sha


def test_threads_without_checkpoints_are_released_and_collected(tmp_path):
    saver = build_checkpointer(
        parse_config({"checkpointer": {"path": str(tmp_path / "cp.sqlite")}}).checkpointer
    )
    archive = LocalArchive(tmp_path / "archive")
    for thread in ("live", "user/7 live"):
        _checkpoint(saver, thread)
    kept = [_episode(archive, t, i, age_s=7200) for i, t in enumerate(("live", "user/7 live"))]
    pruned = _episode(archive, "expired", 5, age_s=7200)
    pruned_hashed = _episode(archive, "user/9 expired", 6, age_s=7200)
    young = _episode(archive, "starting", 7)  # no checkpoint yet, but just written: kept
    released = release_pruned_threads(saver, archive, idle_s=3600)
    assert sorted(released) == sorted(["expired", episode_id_for_thread("user/9 expired")])
    archive.gc(grace_seconds=0)
    assert pruned not in archive and pruned_hashed not in archive
    assert all(sha in archive for sha in [*kept, young])


def test_prune_threads_releases_what_prune_deleted():
    class PruningSaver(InMemorySaver):  # LangGraph's prune contract (PostgresSaver implements it)
        def prune(self, thread_ids, *, strategy="keep_latest"):
            self.pruned = (list(thread_ids), strategy)
            if strategy == "delete":
                for thread in thread_ids:
                    self.delete_thread(thread)

    class Archive:
        def __init__(self):
            self.released = []

        def release(self, episode):
            self.released.append(episode)

    saver, archive = PruningSaver(), Archive()
    assert prune_threads(saver, archive, ["a", "b"]) == [] and archive.released == []  # keep_latest
    assert prune_threads(saver, archive, ["a"], strategy="delete") == ["a"] and archive.released == ["a"]
    assert saver.pruned == (["a"], "delete")
    with pytest.raises(TypeError):
        prune_threads(saver, archive, "a")
    with pytest.raises(ValueError, match="strategy"):
        prune_threads(saver, archive, ["a"], strategy="oldest")


def test_the_gc_command_follows_pruning_in_every_tenant_archive(tmp_path, capsys):
    config = tmp_path / "causalcache.yaml"
    config.write_text(
        f"archive:\n  url: {tmp_path / 'archive'}\ncheckpointer:\n  path: {tmp_path / 'cp.sqlite'}\n"
    )
    saver = build_checkpointer(
        parse_config({"checkpointer": {"path": str(tmp_path / "cp.sqlite")}}).checkpointer
    )
    _checkpoint(saver, "a-live")
    tenant = open_namespace(LocalArchive(tmp_path / "archive"), "acme")
    live = _episode(tenant, "a-live", 1, age_s=7200)
    gone = _episode(tenant, "a-gone", 2, age_s=7200)
    args = [
        "archive",
        "gc",
        "--config",
        str(config),
        "--release-pruned",
        "3600",
        "--grace-seconds",
        "0",
        "--json",
    ]
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert (
        out["tenants"]["acme"]["released_episodes"] == ["a-gone"] and out["tenants"]["acme"]["deleted"] == 1
    )
    assert live in tenant and gone not in tenant
    with pytest.raises(SystemExit, match="--config"):
        main(["archive", "gc", str(tmp_path / "archive"), "--release-pruned", "60"])
