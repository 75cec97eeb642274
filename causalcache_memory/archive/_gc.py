"""The collection loop shared by the archive backends, and the rule that keeps it from losing writes.

For each chunk of unreferenced candidates the collector (1) writes a ``gc/`` marker per candidate,
(2) re-reads which objects live episodes reference, then per candidate still unreferenced (3) re-reads
its modification time and deletes it only if it is older than ``grace_seconds``, and (4) removes the
markers. Writers (``put``, ``retain``) first make their change visible (write or refresh the object; write
the reference marker), then wait while a marker names the object, then check the object still exists
(``put`` writes it again; ``retain`` raises ``BlobNotFoundError``). Whatever the interleaving, a returned
``put`` followed by ``retain`` within ``grace_seconds`` is never collected, however long a gc runs.

Writers stop waiting for a marker older than ``GC_MARKER_STALE_SECONDS`` (its collector died), so a
collector decides on a chunk only while its markers are younger than half that; the rest of a chunk that
took longer is left for the next run. Every read of steps (2) and (3) goes to the storage itself, never
to a listing cache (the proof is in docs/RELIABILITY.md).
"""

from __future__ import annotations

import time
from typing import Any

from causalcache_memory.archive._keys import GC_MARKER_STALE_SECONDS
from causalcache_memory.archive.base import GCReport

__all__ = ["CHUNK", "run_gc"]

#: candidates marked at once (a writer of one of them waits at most for one chunk)
CHUNK = 128


def run_gc(archive: Any, *, grace_seconds: float, dry_run: bool, temp_grace_seconds: float) -> GCReport:
    """Delete unreferenced objects older than ``grace_seconds``; sweep temporary files.

    ``archive`` provides ``_referenced()``, ``_stored()`` (``(sha, handle)`` of every blob and record),
    ``_mark(sha)``/``_unmark(marker)``, ``_collect(sha, handle, grace, dry_run) -> (outcome, size)``
    (outcome ``"deleted"``, ``"recent"``, ``"gone"`` or ``"kept"``) and
    ``_sweep_tmp(cutoff)``.
    """
    if not grace_seconds >= 0:
        raise ValueError(f"grace_seconds={grace_seconds!r} must be >= 0")
    live = archive._referenced()
    stored = archive._stored()
    candidates = [(sha, handle) for sha, handle in stored if sha not in live]
    kept = len(stored) - len(candidates)
    deleted = freed = recent = 0
    for start in range(0, len(candidates), CHUNK):
        chunk = candidates[start : start + CHUNK]
        marked_at = time.monotonic()
        markers = [] if dry_run else [archive._mark(sha) for sha, _ in chunk]
        try:
            live_now = live if dry_run else archive._referenced()
            for sha, handle in chunk:
                if sha in live_now or time.monotonic() - marked_at > GC_MARKER_STALE_SECONDS / 2:
                    kept += 1  # referenced by now, or our markers are too old to hold writers back
                    continue
                outcome, size = archive._collect(sha, handle, grace_seconds, dry_run)
                if outcome == "kept":
                    kept += 1  # an orphan text whose blob was stored again meanwhile
                elif outcome == "recent":
                    recent += 1
                elif outcome == "deleted":
                    deleted += 1
                    freed += size
        finally:
            for marker in markers:
                archive._unmark(marker)
    if not dry_run:
        archive._sweep_tmp(time.time() - max(grace_seconds, temp_grace_seconds))
    return GCReport(kept=kept, deleted=deleted, bytes_freed=freed, skipped_recent=recent)
