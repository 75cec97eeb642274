"""Recorded LangGraph threads for the learn tests: Recent-2 episodes of a training world, SQLite saver."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph")


@dataclass
class Recorded:
    checkpointer: Path
    archive: Path
    outcomes: dict[str, bool]  # thread id -> success


def record_threads(root: Path, n: int, *, seed: int = 5, allocation: Any = None) -> Recorded:
    """``n`` Recent-2 episodes (or ``allocation``'s) of world ``train-00`` recorded through the LangGraph
    world agent."""
    from langgraph.checkpoint.sqlite import SqliteSaver

    from causalcache_lab.eval.world_agent import build_world_agent, memory_for, run_world_episode
    from causalcache_lab.world.family import policy_for_world
    from causalcache_lab.world.family_tasks import generate_world_tasks
    from causalcache_memory.archive.local import LocalArchive

    archive = LocalArchive(root / "archive")
    db = root / "checkpoints.sqlite"
    conn = sqlite3.connect(str(db), check_same_thread=False)
    policy = policy_for_world("train-00", 0)
    memory = memory_for("recent", 2, policy, archive, None, allocation=allocation)
    graph = build_world_agent(memory, SqliteSaver(conn))
    outcomes = {}
    try:
        for task in generate_world_tasks(n, seed, worlds="train-00", purpose="train"):
            tid = f"thread-{task.task_id}"
            out = run_world_episode(
                task, memory, graph, arm="recent", policy=policy, archive=archive, thread_id=tid,
                max_steps=len(task.steps) + 4,
            )  # fmt: skip
            outcomes[tid] = out.success
    finally:
        memory.close()
        conn.close()
    return Recorded(db, root / "archive", outcomes)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    return record_threads(tmp_path_factory.mktemp("threads"), 8)


@pytest.fixture
def thread_recorder() -> Any:
    """:func:`record_threads` as a factory fixture (threads recorded with another allocation)."""
    return record_threads


@pytest.fixture(autouse=True)
def _trust_test_factories(monkeypatch: pytest.MonkeyPatch) -> None:
    """The learn configs of these tests name factories of test modules (``helpers``, ``scripted``):
    trusted as a user would trust their own modules, through the environment."""
    monkeypatch.setenv(
        "CAUSALCACHE_TRUSTED_MODULES",
        "helpers,scripted,labmod_declared,labmod_source,labmod_legacy",
    )
