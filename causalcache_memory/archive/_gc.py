"""The collection loop shared by the archive backends (the marker rule is in each backend's ``_collect``)."""

from __future__ import annotations

import time
from typing import Any

from causalcache_memory.archive.base import GCReport

__all__ = ["run_gc"]


def run_gc(archive: Any, *, grace_seconds: float, dry_run: bool, temp_grace_seconds: float) -> GCReport:
    """Delete unreferenced objects older than ``grace_seconds``; sweep temporary files.

    ``archive`` provides ``_referenced()`` (hashes some live episode retains), ``_stored()`` (``(sha,
    handle)`` of every blob and record), ``_collect(sha, handle, grace, dry_run) -> (outcome, size)``
    and ``_sweep_tmp(cutoff)``.
    """
    if not grace_seconds >= 0:
        raise ValueError(f"grace_seconds={grace_seconds!r} must be >= 0")
    live = archive._referenced()
    kept = deleted = freed = recent = 0
    for sha, handle in archive._stored():
        if sha in live:
            kept += 1
            continue
        outcome, size = archive._collect(sha, handle, grace_seconds, dry_run)
        if outcome == "recent":
            recent += 1
        elif outcome == "deleted":
            deleted += 1
            freed += size
    if not dry_run:
        archive._sweep_tmp(time.time() - max(grace_seconds, temp_grace_seconds))
    return GCReport(kept=kept, deleted=deleted, bytes_freed=freed, skipped_recent=recent)
