"""Checkpoints wait for the screenshots they reference: the memory's checkpointers flush its writes first.

The memory writes screenshots in the background while the step goes on
(:class:`~causalcache_memory.archive.deferred.DeferredArchive`), so the disk's ``fsync`` overlaps the
model call. A checkpoint is what makes a step's trace head reachable after a crash, so no checkpoint may
be persisted before the screenshots written so far are durable. :func:`waiting_saver` makes a saver
(any ``BaseCheckpointSaver``; it stays an instance of its own class) call
:meth:`CausalCacheMemory.flush_writes` before ``put``/``put_writes`` and their async twins;
:meth:`CausalCacheMemory.checkpointer` and :meth:`~CausalCacheMemory.acheckpointer` return such savers.
A graph compiled with another saver (or none) gets no overlap: the step session flushes before each
commit instead (:func:`saver_waits` tells which case a running node is in).
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["saver_waits", "waiting_saver"]

_CLASSES: dict[type, type] = {}
_MEMORY = "_causalcache_memory"


def _waiting_class(cls: type) -> type:
    """A subclass of ``cls`` whose writes flush the memory's screenshot writes first (built once)."""
    sub = _CLASSES.get(cls)
    if sub is not None:
        return sub

    def put(self: Any, *args: Any, **kwargs: Any) -> Any:
        getattr(self, _MEMORY).flush_writes()
        return cls.put(self, *args, **kwargs)  # type: ignore[attr-defined]

    def put_writes(self: Any, *args: Any, **kwargs: Any) -> Any:
        getattr(self, _MEMORY).flush_writes()
        return cls.put_writes(self, *args, **kwargs)  # type: ignore[attr-defined]

    async def aput(self: Any, *args: Any, **kwargs: Any) -> Any:
        await asyncio.to_thread(getattr(self, _MEMORY).flush_writes)
        return await cls.aput(self, *args, **kwargs)  # type: ignore[attr-defined]

    async def aput_writes(self: Any, *args: Any, **kwargs: Any) -> Any:
        await asyncio.to_thread(getattr(self, _MEMORY).flush_writes)
        return await cls.aput_writes(self, *args, **kwargs)  # type: ignore[attr-defined]

    methods = {"put": put, "put_writes": put_writes, "aput": aput, "aput_writes": aput_writes}
    sub = type(cls.__name__, (cls,), {**methods, "__module__": cls.__module__, "__doc__": cls.__doc__})
    return _CLASSES.setdefault(cls, sub)


def waiting_saver(saver: Any, memory: Any) -> Any:
    """``saver``, made to wait for ``memory``'s screenshot writes before persisting (see module doc)."""
    saver.__class__ = _waiting_class(type(saver))
    setattr(saver, _MEMORY, memory)
    return saver


def saver_waits(memory: Any) -> bool:
    """Whether the running graph's checkpointer waits for ``memory``'s writes (False outside a graph)."""
    try:
        from langgraph.config import get_config

        configurable = get_config().get("configurable", {})
    except (ImportError, RuntimeError):
        return False
    return getattr(configurable.get("__pregel_checkpointer"), _MEMORY, None) is memory
