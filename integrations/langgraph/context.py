"""How the archive and policy reach the memory at run time: LangGraph's runtime context, never state."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = ["CausalCacheContext", "context_from_runtime", "episode_id_for", "episode_id_for_thread"]

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")


@dataclass(frozen=True)
class CausalCacheContext:
    """Run-scoped objects for the memory, passed as ``graph.invoke(..., context=CausalCacheContext(...))``.

    A user context may instead carry one under the attribute (or mapping key) ``causalcache``.

    Attributes:
        policy: the GUI policy for this run (overrides the memory's constructor/config policy).
        archive: the screenshot archive for this run (overrides the constructor/config archive).
    """

    policy: Policy | None = None
    archive: ScreenshotArchive | None = None


def context_from_runtime(runtime: Any) -> CausalCacheContext | None:
    """The :class:`CausalCacheContext` in ``runtime.context`` (directly or under ``causalcache``)."""
    ctx = getattr(runtime, "context", None)
    if ctx is None or isinstance(ctx, CausalCacheContext):
        return ctx
    inner = ctx.get("causalcache") if isinstance(ctx, dict) else getattr(ctx, "causalcache", None)
    return inner if isinstance(inner, CausalCacheContext) else None


def episode_id_for(runtime: Any, default: str = "episode") -> str:
    """An archive-safe episode id from the run's ``thread_id`` (hashed when it has unsafe characters)."""
    info = getattr(runtime, "execution_info", None)
    thread = getattr(info, "thread_id", None)
    if thread is None:
        try:
            from langgraph.config import get_config

            thread = get_config().get("configurable", {}).get("thread_id")
        except RuntimeError:
            thread = None
    if not thread:
        return default
    return episode_id_for_thread(str(thread))


def episode_id_for_thread(thread: str) -> str:
    """The archive-safe episode id of a LangGraph ``thread_id`` (itself, or a hash when unsafe)."""
    if _SAFE.fullmatch(thread):
        return thread
    return "thread-" + hashlib.sha256(thread.encode()).hexdigest()[:32]
