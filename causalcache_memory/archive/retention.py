"""Retention by age: release episodes nobody has written to for a while, so ``gc`` can reclaim them.

An episode's last activity is the newest time one of its references was recorded (``retain``): the
``refs/<episode>`` folder's mtime on a local archive, the newest marker object on fsspec stores. A
long-running deployment runs ``release_idle`` (or ``causalcache archive gc --release-idle SECONDS``) and
then ``gc`` on a schedule; the LangGraph integration also releases an episode when its thread is
deleted (:mod:`causalcache_memory.integrations.langgraph.retention`).
"""

from __future__ import annotations

import time
from typing import Any

__all__ = ["episode_activity", "release_idle"]


def episode_activity(archive: Any, episode_id: str) -> float | None:
    """Epoch seconds of the episode's newest reference, or None when it has none (or the store has no times)."""
    return archive._episode_mtime(episode_id)


def release_idle(
    archive: Any, older_than_s: float, *, now: float | None = None, dry_run: bool = False
) -> list[str]:
    """Release every episode whose newest reference is older than ``older_than_s``; return their ids.

    Episodes whose age cannot be read (a store without modification times) are kept.
    """
    if not older_than_s > 0:
        raise ValueError(f"older_than_s={older_than_s!r} must be > 0 seconds")
    now = time.time() if now is None else now
    released = []
    for episode in archive.live_episodes():
        stamp = episode_activity(archive, episode)
        if stamp is not None and now - stamp > older_than_s:
            if not dry_run:
                archive.release(episode)
            released.append(episode)
    return released
