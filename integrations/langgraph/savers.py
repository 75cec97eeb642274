"""The checkpointers of ``CausalCacheMemory``, and a SQLite one that serves sync and async graph runs.

LangGraph's ``SqliteSaver`` raises ``NotImplementedError`` from its async methods, so a graph compiled
with it cannot run under ``ainvoke``/``astream``. :class:`ThreadedSqliteSaver` keeps the same file
format and runs each async method's sync twin in a worker thread (the saver serializes access to its
connection with a lock), so one ``memory.checkpointer()`` works for ``invoke`` and ``ainvoke`` alike.
For LangGraph's native async savers use :meth:`CausalCacheMemory.acheckpointer`.

:func:`with_durability` gives a compiled graph a default ``durability``: ``"sync"`` (the default of
``checkpointer.durability``) stores each step's checkpoint before the next step starts, so a process
killed after an action re-executes at most the step that was running (docs/LANGGRAPH.md, "Durability").
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.sqlite import SqliteSaver

from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_memory.config.models import CheckpointConfig

__all__ = [
    "DURABILITY_MODES",
    "ThreadedSqliteSaver",
    "build_checkpointer",
    "open_async_checkpointer",
    "with_durability",
]

#: LangGraph's durability modes (``graph.invoke(..., durability=...)``)
DURABILITY_MODES = ("sync", "async", "exit")


class ThreadedSqliteSaver(SqliteSaver):
    """``SqliteSaver`` whose async methods run the sync ones in a worker thread."""

    async def aget_tuple(self, config: Any) -> Any:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: Any,
        *,
        filter: dict[str, Any] | None = None,
        before: Any = None,
        limit: int | None = None,
    ) -> AsyncIterator[Any]:
        items = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for item in items:
            yield item

    async def aput(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self, config: Any, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)


def with_durability(graph: Any, durability: str) -> Any:
    """``graph`` whose runs default to ``durability`` (a run's own ``durability=`` argument still wins).

    LangGraph reads a run's default from a configurable key (the one it sets for subgraphs); the graph's
    config carries it to every ``invoke``/``stream``/``ainvoke``/``astream``.
    """
    if durability not in DURABILITY_MODES:
        raise ConfigError(
            f"durability={durability!r}: use one of {', '.join(DURABILITY_MODES)} ('sync' for agents whose "
            "actions have side effects)"
        )
    try:
        from langgraph._internal._constants import CONFIG_KEY_DURABILITY
    except ImportError:  # older layouts: the key's value has not changed
        CONFIG_KEY_DURABILITY = "__pregel_durability"
    return graph.with_config(configurable={CONFIG_KEY_DURABILITY: durability})


def build_checkpointer(cfg: CheckpointConfig) -> Any:
    """The saver named by ``cfg`` (``ThreadedSqliteSaver``, ``InMemorySaver`` or ``PostgresSaver``)."""
    if cfg.kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    if cfg.kind == "sqlite":
        if cfg.path != ":memory:":
            Path(cfg.path).parent.mkdir(parents=True, exist_ok=True)
        return ThreadedSqliteSaver(sqlite3.connect(cfg.path, check_same_thread=False))
    postgres = require("langgraph.checkpoint.postgres", purpose="the PostgreSQL checkpointer")
    psycopg = require("psycopg", purpose="the PostgreSQL checkpointer")
    rows = require("psycopg.rows", purpose="the PostgreSQL checkpointer")
    conn = psycopg.connect(cfg.uri, autocommit=True, prepare_threshold=0, row_factory=rows.dict_row)
    saver = postgres.PostgresSaver(conn)
    saver.setup()
    return saver


@contextlib.asynccontextmanager
async def open_async_checkpointer(cfg: CheckpointConfig) -> AsyncIterator[Any]:
    """LangGraph's native async saver for ``cfg``; its connection closes on exit."""
    if cfg.kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
        return
    if cfg.kind == "sqlite":
        aio = require("langgraph.checkpoint.sqlite.aio", purpose="the async SQLite checkpointer")
        if cfg.path != ":memory:":
            Path(cfg.path).parent.mkdir(parents=True, exist_ok=True)
        async with aio.AsyncSqliteSaver.from_conn_string(cfg.path) as saver:
            yield saver
        return
    aio_pg = require("langgraph.checkpoint.postgres.aio", purpose="the async PostgreSQL checkpointer")
    async with aio_pg.AsyncPostgresSaver.from_conn_string(cfg.uri) as saver:
        await saver.setup()
        yield saver
