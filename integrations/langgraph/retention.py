"""Retention for LangGraph deployments: release a thread's screenshots when the thread is deleted or idle.

The memory retains every screenshot and trace record of a run under the episode id of its
``thread_id`` (:func:`~causalcache_memory.integrations.langgraph.context.episode_id_for_thread`). Nothing
is deleted until that episode is *released* and a ``gc`` runs:

* :func:`delete_thread` deletes the thread's checkpoints (``checkpointer.delete_thread``) and releases its
  episode in the archive; :func:`adelete_thread` is the async form;
* :func:`release_idle_threads` releases every episode with no new reference for ``older_than_s`` seconds
  (for threads that are never deleted explicitly);
* :func:`prune_threads` prunes checkpoints the LangGraph way (``checkpointer.prune``, e.g.
  ``PostgresSaver``) and releases the threads whose checkpoints it deleted (``strategy="delete"``);
* :func:`release_pruned_threads` follows pruning done elsewhere (checkpoint TTLs, a LangGraph server's
  sweeps, ``prune`` or ``DELETE`` run by someone else): it releases every episode whose thread has no
  checkpoint left and no new archive reference for ``idle_s`` seconds
  (``causalcache archive gc --config FILE --release-pruned SECONDS``);
* then run ``archive.gc()`` (or ``causalcache archive gc --release-idle SECONDS``) on a schedule.

``prune(strategy="keep_latest")`` releases nothing: the kept checkpoint's trace chain names every
screenshot of the thread (the chain is the episode), so all of them stay needed.

Released screenshots stay readable until ``gc`` collects them (and ``gc`` keeps anything younger than
its grace period). Resuming a released thread after ``gc`` raises ``PromptImageError`` for the collected
screenshots — release only what you will not resume. See docs/RELIABILITY.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive.retention import episode_activity, release_idle
from causalcache_memory.integrations.langgraph.context import episode_id_for_thread

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = [
    "adelete_thread",
    "delete_thread",
    "prune_threads",
    "release_idle_threads",
    "release_pruned_threads",
    "release_thread",
]


def release_thread(archive: ScreenshotArchive, thread_id: str) -> str:
    """Release the archive references of ``thread_id``; return its episode id.

    Also forgets the trace head this process remembered for the episode, so a new thread with the same
    id starts a new trace instead of conflicting with the old one.
    """
    episode = episode_id_for_thread(str(thread_id))
    archive.release(episode)
    from causalcache_memory.trace.store import TraceStore

    try:
        TraceStore(archive).reset_head(episode)
    except (TypeError, ValueError):  # an archive without trace records: nothing remembered
        pass
    return episode


def delete_thread(checkpointer: Any, archive: ScreenshotArchive, thread_id: str) -> str:
    """Delete the thread's checkpoints, then release its screenshots; return the episode id."""
    if checkpointer is not None:
        checkpointer.delete_thread(thread_id)
    return release_thread(archive, thread_id)


async def adelete_thread(checkpointer: Any, archive: ScreenshotArchive, thread_id: str) -> str:
    """Async :func:`delete_thread` (``checkpointer.adelete_thread``)."""
    if checkpointer is not None:
        await checkpointer.adelete_thread(thread_id)
    return release_thread(archive, thread_id)


def release_idle_threads(
    archive: ScreenshotArchive, older_than_s: float, *, now: float | None = None, dry_run: bool = False
) -> list[str]:
    """Release every episode idle for more than ``older_than_s`` seconds; return the released ids."""
    return release_idle(archive, older_than_s, now=now, dry_run=dry_run)


def prune_threads(
    checkpointer: Any, archive: Any, thread_ids: Sequence[str], *, strategy: str = "keep_latest"
) -> list[str]:
    """``checkpointer.prune(thread_ids, strategy=...)``, then release the threads it deleted; return
    their episode ids (none for ``"keep_latest"``, which keeps each thread's latest checkpoint)."""
    if isinstance(thread_ids, str):
        raise TypeError("thread_ids must be a sequence of thread ids, not one str")
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(
            f"strategy={strategy!r}: use 'keep_latest' or 'delete' (LangGraph's prune strategies)"
        )
    checkpointer.prune(list(thread_ids), strategy=strategy)
    return [release_thread(archive, t) for t in thread_ids] if strategy == "delete" else []


_HASHED = re.compile(r"^thread-[0-9a-f]{32}$")


def release_pruned_threads(
    checkpointer: Any,
    archive: Any,
    *,
    idle_s: float = 3600.0,
    now: float | None = None,
    dry_run: bool = False,
) -> list[str]:
    """Release every episode whose thread has no checkpoint left in ``checkpointer``; return their ids.

    An episode is released only when, besides, its newest archive reference is older than ``idle_s``
    (a thread whose first checkpoint is still being written is not pruned). Episode ids that are the
    thread id are checked with one ``get_tuple`` each; hashed ids (threads with unsafe characters) by
    listing the checkpointer's threads once. Run it only against the checkpointer that holds the
    threads of this archive: an episode recorded without it (no checkpointer, another database) is
    released too.
    """
    if not idle_s > 0:
        raise ValueError(f"idle_s={idle_s!r} must be > 0 seconds")
    now = time.time() if now is None else now
    listed: set[str] | None = None
    released = []
    for episode in archive.live_episodes():
        stamp = episode_activity(archive, episode)
        if stamp is None or now - stamp <= idle_s:
            continue
        if _HASHED.fullmatch(episode):
            if listed is None:
                listed = {episode_id_for_thread(str(t)) for t in _thread_ids(checkpointer)}
            alive = episode in listed
        else:
            config = {"configurable": {"thread_id": episode, "checkpoint_ns": ""}}
            alive = checkpointer.get_tuple(config) is not None
        if not alive:
            if not dry_run:
                release_thread(archive, episode)
            released.append(episode)
    return released


def _thread_ids(checkpointer: Any) -> set[str]:
    return {str(c.config["configurable"]["thread_id"]) for c in checkpointer.list(None)}
