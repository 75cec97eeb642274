"""Collection and maintenance of :class:`~causalcache_memory.archive.remote.FsspecArchive`.

``gc`` follows the marker rule of :mod:`causalcache_memory.archive.local`: a marker object
``gc/<sha256>.*`` is written before the collector re-reads the object's time, and writers wait while one
names their object. Object age comes from the store's modification/creation time; objects without one
are treated as old. Object stores keep whole seconds (S3's ``LastModified`` drops the fraction), so a
stamp ``s`` means "written before ``s + 1``": an object is old only once ``now - (s + 1) >= grace``, and
the grace a collector applies is never shorter than the one it was given (docs/RELIABILITY.md).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive._gc import run_gc
from causalcache_memory.archive._keys import (
    GC,
    RECORDS,
    REFS,
    TMP,
    blob_relpath,
    gc_marker_name,
    record_relpath,
    temp_writer_is_dead,
)
from causalcache_memory.archive._texts import TEXTS, text_relpath
from causalcache_memory.archive.base import GCReport

__all__ = ["STAMP_RESOLUTION_S", "TEMP_GRACE_SECONDS", "FsspecCollection", "info_mtime"]

#: temporary files of the rename path older than this are collected by ``gc``.
TEMP_GRACE_SECONDS = 300.0
#: resolution of object-store timestamps: a stamp ``s`` may name any write in ``[s, s + 1)``
STAMP_RESOLUTION_S = 1.0


def _as_epoch(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def info_mtime(info: Mapping[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "timeCreated"):
        if key in info:
            stamp = _as_epoch(info[key])
            if stamp is not None:
                return stamp
    return None


class FsspecCollection:
    """``gc`` and the maintenance hooks of the fsspec archive (a mixin)."""

    fs: Any
    _fs: Any
    url: str
    atomic_put: bool
    _path: Any
    _io: Any

    if TYPE_CHECKING:

        def __contains__(self, sha256: object) -> bool: ...  # provided by FsspecArchive

    _list: Any
    _list_blobs: Any
    _ls_names: Any
    _refresh: Any
    live_episodes: Any
    references: Any

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        """Delete blobs and records no live episode references and older than ``grace_seconds``."""
        return run_gc(
            self, grace_seconds=grace_seconds, dry_run=dry_run, temp_grace_seconds=TEMP_GRACE_SECONDS
        )

    def _referenced(self) -> set[str]:
        """Every hash some episode references, listed from the storage now (no listing cache)."""
        live: set[str] = set()
        for episode in self._ls_names(self._path(REFS)):
            live |= self.references(episode)
        return live

    def _stored(self) -> list[tuple[str, str]]:
        """Every blob and record, and every text whose blob is not stored (an orphan); the text of a
        stored blob is no candidate of its own: it is deleted with its blob (:meth:`_collect`)."""
        blobs = self._list_blobs()
        stored = [(sha, self._path(blob_relpath(sha))) for sha in blobs]
        stored += [(sha, self._path(record_relpath(sha))) for sha in self._list(RECORDS)]
        return stored + [
            (sha, self._path(text_relpath(sha))) for sha in self._list(TEXTS) if sha not in blobs
        ]

    def _mark(self, sha: str) -> str:
        """Announce that a collector is deciding on ``sha`` (writers wait while the marker exists)."""
        marker = self._path(f"{GC}/{gc_marker_name(sha)}")
        with self._io(f"cannot write gc marker for {sha}"):
            if not self.atomic_put:
                self._fs.makedirs(self._path(GC), exist_ok=True)
            self._fs.pipe_file(marker, b"")
        return marker

    def _unmark(self, marker: str) -> None:
        with contextlib.suppress(FileNotFoundError), self._io("cannot remove a gc marker"):
            self._fs.rm_file(marker)

    def _collect(self, sha: str, path: str, grace: float, dry_run: bool) -> tuple[str, int]:
        """Delete one object (marked and still unreferenced) if it is older than ``grace`` now.

        A blob takes its text with it. An orphan text is deleted only if its blob is still absent now
        (a writer may have stored the blob again since the listing)."""
        text = path == self._path(text_relpath(sha))
        if text and sha in self:
            return "kept", 0
        outcome, size = self._collect_one(sha, path, grace, dry_run)
        if outcome == "deleted" and not text:
            size += self._collect_one(sha, self._path(text_relpath(sha)), 0.0, dry_run)[1]
        return outcome, size

    def _collect_one(self, sha: str, path: str, grace: float, dry_run: bool) -> tuple[str, int]:
        with self._io(f"cannot collect object {sha}"):
            self._fs.invalidate_cache(path)
            try:
                info = self._fs.info(path, **self._refresh)
            except FileNotFoundError:
                return "gone", 0
            mtime = info_mtime(info)
            if grace > 0 and mtime is not None and time.time() - (mtime + STAMP_RESOLUTION_S) < grace:
                return "recent", 0
            if not dry_run:
                try:
                    self._fs.rm_file(path)
                except FileNotFoundError:
                    return "gone", 0
            return "deleted", int(info.get("size") or 0)

    def _sweep_tmp(self, cutoff: float | None) -> int:
        """Remove temp files of dead writers on this host and (``cutoff`` given) any older than it."""
        folder = self._path(TMP)
        removed = 0
        with self._io("cannot sweep temporary files"):
            self._fs.invalidate_cache(folder)
            try:
                entries = self._fs.ls(folder, detail=True, **self._refresh)
            except FileNotFoundError:
                return 0
            for info in entries:
                if info.get("type", "file") != "file" or info.get("islink"):
                    continue
                name = str(info["name"]).rstrip("/").rsplit("/", 1)[-1]
                mtime = info_mtime(info)
                if temp_writer_is_dead(name) or (cutoff is not None and mtime is not None and mtime < cutoff):
                    with contextlib.suppress(FileNotFoundError):
                        self._fs.rm_file(f"{folder}/{name}")
                        removed += 1
        return removed

    # ------------------------------------------------------------------ maintenance (causalcache archive check)
    def _discard(self, kind: str, sha: str) -> None:
        rel = {"blob": blob_relpath, "text": text_relpath}.get(kind, record_relpath)(sha)
        with contextlib.suppress(FileNotFoundError), self._io(f"cannot delete {kind} {sha}"):
            self._fs.rm_file(self._path(rel))

    def _layout_problems(self) -> list[str]:
        return []

    def _temp_files(self) -> int:
        with self._io("cannot list temporary files"):
            return len(self._ls_names(self._path(TMP), files_only=True))
