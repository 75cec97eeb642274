"""Archive backend on any fsspec URL (``s3://``, ``gs://``, ``az://``, ``memory://`` ...).

Same layout and contract as :class:`~causalcache_memory.archive.local.LocalArchive`, so many agent
workers on different machines can share one archive:

* a blob is written with one ``pipe_file`` of the whole object. Object stores (S3, GCS, Azure) make a
  single PUT atomic per object: readers see the old state or the complete object, never a prefix. Two
  workers uploading the same screenshot write identical bytes, so the race is harmless. On filesystems
  without atomic object writes (SFTP, some FUSE mounts) prefer a local path, which uses rename.
* an existence check before writing gives de-duplication (a racing duplicate upload only costs bandwidth);
* every read is re-hashed (``BlobCorruptError`` on mismatch);
* retention markers are empty objects ``refs/<episode>/<sha256>``; ``gc`` lists ``blobs/``, ``records/``
  and ``refs/``.
* small JSON records (trace chain nodes, :mod:`causalcache_memory.trace_store`) live under
  ``records/ab/<sha256>`` with the same whole-object write, de-duplication and re-hash on read, without
  image validation; retention and ``gc`` treat them like blobs.
  Blob age comes from the store's modification/creation time; objects without one are treated as old.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive._keys import (
    BLOBS,
    RECORDS,
    REFS,
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

__all__ = ["FsspecArchive"]


def _as_epoch(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, datetime):
        return value.timestamp()
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    return None


def _info_mtime(info: Mapping[str, Any]) -> float | None:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created", "timeCreated"):
        if key in info:
            stamp = _as_epoch(info[key])
            if stamp is not None:
                return stamp
    return None


class FsspecArchive:
    """Content-addressed screenshot archive on an fsspec filesystem.

    Args:
        url: archive root, e.g. ``"s3://bucket/screens"`` or ``"memory://tests/run-1"``.
        max_pixels: largest accepted ``width * height``; also enforced on every decode.
        formats: accepted container formats, a subset of ``("PNG", "JPEG", "WEBP")``.
        **storage_options: passed to fsspec (credentials, endpoint, ...).
    """

    def __init__(
        self,
        url: str,
        *,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        formats: Iterable[str] = DEFAULT_FORMATS,
        **storage_options: Any,
    ) -> None:
        from fsspec.core import url_to_fs

        self.max_pixels = check_max_pixels(max_pixels)
        self.formats = check_formats(formats)
        try:
            self.fs, root = url_to_fs(url, **storage_options)
        except (ImportError, ValueError) as exc:
            raise ArchiveError(f"cannot open archive url={url!r}: {exc}") from exc
        self.root = root.rstrip("/")
        self.url = url

    def __repr__(self) -> str:
        return f"FsspecArchive({self.url!r})"

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    # ------------------------------------------------------------------ blobs
    def put(self, data: bytes | Image.Image) -> str:
        """Validate and upload ``data`` unchanged (one whole-object write); return its sha256."""
        raw = to_bytes(data)
        validate_image_bytes(raw, max_pixels=self.max_pixels, formats=self.formats)
        sha = digest(raw)
        path = self._path(blob_relpath(sha))
        if self.fs.exists(path):
            return sha
        try:
            self.fs.pipe_file(path, raw)
        except OSError as exc:
            raise ArchiveError(f"could not write blob {sha} to {self.url}: {exc}") from exc
        return sha

    # ------------------------------------------------------------------ records
    def put_record(self, data: bytes) -> str:
        """Upload a small record (any bytes, not image-validated) in one write; return its sha256."""
        raw = check_record_bytes(data)
        sha = digest(raw)
        path = self._path(record_relpath(sha))
        if self.fs.exists(path):
            return sha
        try:
            self.fs.pipe_file(path, raw)
        except OSError as exc:
            raise ArchiveError(f"could not write record {sha} to {self.url}: {exc}") from exc
        return sha

    def get_record(self, sha256: str) -> bytes:
        """The bytes of record ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self._path(record_relpath(check_hash(sha256))), sha256, "record")

    def has_record(self, sha256: object) -> bool:
        return is_hash(sha256) and bool(self.fs.exists(self._path(record_relpath(sha256))))  # type: ignore[arg-type]

    def iter_records(self) -> Iterator[str]:
        yield from sorted(self._list(RECORDS))

    def get_bytes(self, sha256: str) -> bytes:
        """The original bytes of blob ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self._path(blob_relpath(check_hash(sha256))), sha256, "blob")

    def _read_verified(self, path: str, sha256: str, kind: str) -> bytes:
        try:
            raw = bytes(self.fs.cat_file(path))
        except FileNotFoundError:
            raise BlobNotFoundError(f"{kind} {sha256} is not in archive {self.url}") from None
        except OSError as exc:
            raise ArchiveError(f"could not read {kind} {sha256} from {self.url}: {exc}") from exc
        return verified(raw, sha256, kind=kind, url=self.url, location=path)

    def open_image(self, sha256: str) -> Image.Image:
        """Lazily decoded image of blob ``sha256`` (integrity-checked, pixel limit enforced)."""
        return open_image_bytes(self.get_bytes(sha256), max_pixels=self.max_pixels, formats=self.formats)

    def __contains__(self, sha256: object) -> bool:
        return is_hash(sha256) and bool(self.fs.exists(self._path(blob_relpath(sha256))))  # type: ignore[arg-type]

    def _list_blobs(self) -> dict[str, Mapping[str, Any]]:
        return self._list(BLOBS)

    def _list(self, sub: str) -> dict[str, Mapping[str, Any]]:
        try:
            found = self.fs.find(self._path(sub), detail=True)
        except FileNotFoundError:
            return {}
        out = {}
        for path, info in found.items():
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if is_hash(name) and info.get("type", "file") == "file":
                out[name] = info
        return out

    def iter_hashes(self) -> Iterator[str]:
        yield from sorted(self._list_blobs())

    def size_bytes(self, sha256: str) -> int:
        try:
            return int(self.fs.size(self._path(blob_relpath(check_hash(sha256)))))
        except FileNotFoundError:
            raise BlobNotFoundError(f"blob {sha256} is not in archive {self.url}") from None

    # ------------------------------------------------------------------ retention
    def retain(self, episode_id: str, hashes: Iterable[str]) -> None:
        """Record that ``episode_id`` references ``hashes`` (all validated before anything is written)."""
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        for sha in check_hashes(hashes):
            marker = f"{folder}/{sha}"
            if not self.fs.exists(marker):
                self.fs.pipe_file(marker, b"")

    def release(self, episode_id: str) -> None:
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(folder, recursive=True)

    def _ls_names(self, path: str) -> list[str]:
        try:
            entries = self.fs.ls(path, detail=False)
        except FileNotFoundError:
            return []
        return [str(e).rstrip("/").rsplit("/", 1)[-1] for e in entries]

    def live_episodes(self) -> list[str]:
        episodes = []
        for name in self._ls_names(self._path(REFS)):
            if self.references(name):
                episodes.append(name)
        return sorted(episodes)

    def references(self, episode_id: str) -> set[str]:
        folder = self._path(f"{REFS}/{check_episode_id(episode_id)}")
        return {n for n in self._ls_names(folder) if is_hash(n)}

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        """Delete blobs and records no live episode references and older than ``grace_seconds``."""
        if grace_seconds < 0:
            raise ValueError(f"grace_seconds={grace_seconds!r} must be >= 0")
        live: set[str] = set()
        for episode in self.live_episodes():
            live |= self.references(episode)
        now = time.time()
        kept = deleted = freed = recent = 0
        stored = [(sha, info, blob_relpath(sha)) for sha, info in self._list_blobs().items()]
        stored += [(sha, info, record_relpath(sha)) for sha, info in self._list(RECORDS).items()]
        for sha, info, rel in stored:
            if sha in live:
                kept += 1
                continue
            mtime = _info_mtime(info)
            if mtime is not None and now - mtime < grace_seconds:
                recent += 1
                continue
            if not dry_run:
                try:
                    self.fs.rm_file(self._path(rel))
                except FileNotFoundError:
                    continue
            deleted += 1
            freed += int(info.get("size") or 0)
        return GCReport(kept=kept, deleted=deleted, bytes_freed=freed, skipped_recent=recent)
