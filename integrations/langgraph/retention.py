"""Retention for LangGraph deployments: release a thread's screenshots when the thread is deleted or idle.

The memory retains every screenshot and trace record of a run under the episode id of its
``thread_id`` (:func:`~causalcache_memory.integrations.langgraph.context.episode_id_for_thread`). Nothing
is deleted until that episode is *released* and a ``gc`` runs:

* :func:`delete_thread` deletes the thread's checkpoints (``checkpointer.delete_thread``) and releases its
  episode in the archive; :func:`adelete_thread` is the async form;
* :func:`release_idle_threads` releases every episode with no new reference for ``older_than_s`` seconds
  (for threads that are never deleted explicitly);
* then run ``archive.gc()`` (or ``causalcache archive gc --release-idle SECONDS``) on a schedule.

Released screenshots stay readable until ``gc`` collects them (and ``gc`` keeps anything younger than
its grace period). Resuming a released thread after ``gc`` raises ``PromptImageError`` for the collected
screenshots — release only what you will not resume. See docs/RELIABILITY.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from causalcache_memory.archive.retention import release_idle
from causalcache_memory.integrations.langgraph.context import episode_id_for_thread

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["adelete_thread", "delete_thread", "release_idle_threads", "release_thread"]


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
