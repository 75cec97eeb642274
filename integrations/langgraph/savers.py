"""A SQLite checkpointer that serves both sync and async graph runs.

LangGraph's ``SqliteSaver`` raises ``NotImplementedError`` from its async methods, so a graph compiled
with it cannot run under ``ainvoke``/``astream``. :class:`ThreadedSqliteSaver` keeps the same file
format and runs each async method's sync twin in a worker thread (the saver serializes access to its
connection with a lock), so one ``memory.checkpointer()`` works for ``invoke`` and ``ainvoke`` alike.
For LangGraph's native async savers use :meth:`CausalCacheMemory.acheckpointer`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

__all__ = ["ThreadedSqliteSaver"]


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
