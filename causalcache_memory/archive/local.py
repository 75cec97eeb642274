"""The default archive backend: a local directory, safe for concurrent threads and processes.

Writes go to a unique temporary file under ``root/tmp`` (same filesystem), are flushed and fsynced, then
``os.replace``-d into ``root/blobs/ab/<sha256>``; the directory entry is fsynced on POSIX. Readers never
see partial blobs, and two writers of the same bytes race harmlessly (both rename identical content).
Retention uses one empty marker file per (episode, blob), so ``retain`` from many processes needs no lock
and no read-modify-write.

Small JSON records (the nodes of a hash-chained trace, :mod:`causalcache_memory.trace_store`) use the same
atomic write, de-duplication and integrity check under ``root/records/ab/<sha256>``, without image
validation; ``retain`` and ``gc`` treat a record hash exactly like a blob hash.

``gc`` and writers coordinate through time, not locks: a blob younger than ``grace_seconds`` is never
collected, and re-putting an existing blob refreshes its mtime. Call ``retain`` within the grace period
of ``put`` (the default hour is ample); ``grace_seconds=0`` is for tests and offline maintenance.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from causalcache_memory.archive._keys import (
    BLOBS,
    RECORDS,
    REFS,
    TMP,
    blob_relpath,
    check_episode_id,
    check_hash,
    check_hashes,
    check_record_bytes,
    digest,
    is_hash,
    record_relpath,
    verified,
)
from causalcache_memory.archive.base import GCReport
from causalcache_memory.archive.images import (
    DEFAULT_FORMATS,
    DEFAULT_MAX_PIXELS,
    check_formats,
    check_max_pixels,
    open_image_bytes,
    to_bytes,
    validate_image_bytes,
)
from causalcache_memory.errors import ArchiveError, BlobNotFoundError

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["TEMP_GRACE_SECONDS", "LocalArchive"]

#: Temporary files younger than this are never collected, whatever ``grace_seconds`` says: they may
#: belong to a write in flight.
TEMP_GRACE_SECONDS = 300.0


def _fsync_dir(path: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LocalArchive:
    """Content-addressed screenshot archive in a local directory.

    Args:
        root: archive directory (created if missing).
        max_pixels: largest accepted ``width * height``; also enforced on every decode.
        formats: accepted container formats, a subset of ``("PNG", "JPEG", "WEBP")``.
    """

    def __init__(
        self,
        root: str | Path,
        *,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        formats: Iterable[str] = DEFAULT_FORMATS,
    ) -> None:
        self.root = Path(root).expanduser().resolve()
        self.max_pixels = check_max_pixels(max_pixels)
        self.formats = check_formats(formats)
        for sub in (BLOBS, RECORDS, REFS, TMP):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
        self.url = self.root.as_uri()

    def __repr__(self) -> str:
        return f"LocalArchive({str(self.root)!r})"

    # ------------------------------------------------------------------ blobs
    def _blob(self, sha256: str) -> Path:
        return self.root / blob_relpath(sha256)

    def put(self, data: bytes | Image.Image) -> str:
        """Validate and store ``data`` unchanged; return its sha256. Existing blobs are not rewritten."""
        raw = to_bytes(data)
        validate_image_bytes(raw, max_pixels=self.max_pixels, formats=self.formats)
        sha = digest(raw)
        path = self._blob(sha)
        if path.is_file():
            with contextlib.suppress(OSError):
                os.utime(path)  # refresh the gc grace period for a re-put blob
            return sha
        self._write_atomic(path, raw)
        return sha

    def _write_atomic(self, path: Path, raw: bytes) -> None:
        tmp = self.root / TMP / f"{path.name}.{os.getpid()}.{threading.get_ident()}.{uuid.uuid4().hex}.tmp"
        try:
            with open(tmp, "xb") as fh:
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(tmp, path)
            except PermissionError:
                # Windows refuses to replace a file another process holds open; same bytes are there.
                if not path.is_file():
                    raise
            _fsync_dir(path.parent)
        except OSError as exc:
            raise ArchiveError(f"could not write blob {path.name} under {self.root}: {exc}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    # ------------------------------------------------------------------ records
    def put_record(self, data: bytes) -> str:
        """Store a small record (any bytes, not image-validated) atomically; return its sha256."""
        raw = check_record_bytes(data)
        sha = digest(raw)
        path = self.root / record_relpath(sha)
        if path.is_file():
            with contextlib.suppress(OSError):
                os.utime(path)  # refresh the gc grace period for a re-put record
            return sha
        self._write_atomic(path, raw)
        return sha

    def get_record(self, sha256: str) -> bytes:
        """The bytes of record ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self.root / record_relpath(check_hash(sha256)), sha256, "record")

    def has_record(self, sha256: object) -> bool:
        return is_hash(sha256) and (self.root / record_relpath(sha256)).is_file()  # type: ignore[arg-type]

    def iter_records(self) -> Iterator[str]:
        """Every stored record hash (fan-out order, not sorted)."""
        return self._iter_fanout(RECORDS)

    def get_bytes(self, sha256: str) -> bytes:
        """The original bytes of blob ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self._blob(check_hash(sha256)), sha256, "blob")

    def _read_verified(self, path: Path, sha256: str, kind: str) -> bytes:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise BlobNotFoundError(f"{kind} {sha256} is not in archive {self.url}") from None
        except OSError as exc:
            raise ArchiveError(f"could not read {kind} {sha256} from {path}: {exc}") from exc
        return verified(raw, sha256, kind=kind, url=self.url, location=str(path))

    def open_image(self, sha256: str) -> Image.Image:
        """Lazily decoded image of blob ``sha256`` (integrity-checked, pixel limit enforced)."""
        return open_image_bytes(self.get_bytes(sha256), max_pixels=self.max_pixels, formats=self.formats)

    def __contains__(self, sha256: object) -> bool:
        return is_hash(sha256) and self._blob(sha256).is_file()  # type: ignore[arg-type]

    def iter_hashes(self) -> Iterator[str]:
        """Every stored blob hash (fan-out order, not sorted)."""
        return self._iter_fanout(BLOBS)

    def _iter_fanout(self, sub: str) -> Iterator[str]:
        base = self.root / sub
        if not base.is_dir():
            return
        for fan in sorted(base.iterdir()):
            if not fan.is_dir():
                continue
            for entry in fan.iterdir():
                if is_hash(entry.name) and entry.name[:2] == fan.name:
                    yield entry.name

    def size_bytes(self, sha256: str) -> int:
        """Stored size of blob ``sha256`` in bytes."""
        try:
            return self._blob(check_hash(sha256)).stat().st_size
        except FileNotFoundError:
            raise BlobNotFoundError(f"blob {sha256} is not in archive {self.url}") from None

    # ------------------------------------------------------------------ retention
    def retain(self, episode_id: str, hashes: Iterable[str]) -> None:
        """Record that ``episode_id`` references ``hashes`` (all validated before anything is written)."""
        folder = self.root / REFS / check_episode_id(episode_id)
        wanted = check_hashes(hashes)
        folder.mkdir(parents=True, exist_ok=True)
        for sha in wanted:
            marker = folder / sha
            if not marker.exists():
                with open(marker, "ab"):
                    pass

    def release(self, episode_id: str) -> None:
        """Forget every reference of ``episode_id`` (its blobs become collectable)."""
        folder = self.root / REFS / check_episode_id(episode_id)
        if not folder.is_dir():
            return
        for marker in folder.iterdir():
            with contextlib.suppress(FileNotFoundError):
                marker.unlink()
        with contextlib.suppress(OSError):  # a concurrent retain may have added a marker: keep it
            folder.rmdir()

    def live_episodes(self) -> list[str]:
        return sorted(p.name for p in (self.root / REFS).iterdir() if p.is_dir())

    def references(self, episode_id: str) -> set[str]:
        """Hashes retained by ``episode_id``."""
        folder = self.root / REFS / check_episode_id(episode_id)
        return {p.name for p in folder.iterdir() if is_hash(p.name)} if folder.is_dir() else set()

    def _referenced(self) -> set[str]:
        refs: set[str] = set()
        for episode in self.live_episodes():
            refs |= self.references(episode)
        return refs

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        """Delete blobs and records no live episode references, older than ``grace_seconds`` (by mtime).

        Also removes temporary files older than ``max(grace_seconds, TEMP_GRACE_SECONDS)`` left by
        crashed writers. ``dry_run`` reports what would be deleted and deletes nothing.
        """
        if grace_seconds < 0:
            raise ValueError(f"grace_seconds={grace_seconds!r} must be >= 0")
        live = self._referenced()
        now = time.time()
        kept = deleted = freed = recent = 0
        stored = [(sha, self._blob(sha)) for sha in self.iter_hashes()]
        stored += [(sha, self.root / record_relpath(sha)) for sha in self.iter_records()]
        for sha, path in stored:
            if sha in live:
                kept += 1
                continue
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            if now - st.st_mtime < grace_seconds:
                recent += 1
                continue
            if not dry_run:
                try:
                    path.unlink()
                except FileNotFoundError:
                    continue
            deleted += 1
            freed += st.st_size
        if not dry_run:
            self._sweep_tmp(now - max(grace_seconds, TEMP_GRACE_SECONDS))
        return GCReport(kept=kept, deleted=deleted, bytes_freed=freed, skipped_recent=recent)

    def _sweep_tmp(self, cutoff: float) -> None:
        for entry in (self.root / TMP).iterdir():
            with contextlib.suppress(FileNotFoundError):
                if entry.is_file() and entry.stat().st_mtime < cutoff:
                    entry.unlink()
