"""The default archive backend: a local directory, safe for concurrent threads and processes.

Writes go to a unique temporary file under ``root/tmp`` (same filesystem), are flushed and fsynced, then
``os.replace``-d into ``root/blobs/ab/<sha256>``; the directory entry is fsynced on POSIX. Readers never
see partial blobs, and two writers of the same bytes race harmlessly (both rename identical content).
Retention uses one empty marker file per (episode, blob), so ``retain`` from many processes needs no lock
and no read-modify-write.

Small JSON records (the nodes of a hash-chained trace, :mod:`causalcache_memory.trace_store`) use the same
atomic write, de-duplication and integrity check under ``root/records/ab/<sha256>``, without image
validation; ``retain`` and ``gc`` treat a record hash exactly like a blob hash.

An existing object is never trusted: ``put`` re-reads and re-hashes it, rewrites it when it is damaged
(a torn or flipped file is repaired by the next ``put`` of the same bytes) and refreshes its mtime.

``gc`` and writers follow one rule (docs/RELIABILITY.md, "What ``put`` acknowledges"): before deleting an
object, ``gc`` creates a marker ``gc/<sha256>.*``, re-reads the object's mtime and deletes only if it is
still older than ``grace_seconds``; ``put`` refreshes the object's mtime first, then waits while a marker
for it exists, then checks the object is still there (else writes it again). Whichever order the steps
interleave in, a returned ``put`` names an object that exists and that no running ``gc`` deletes. Call
``retain`` within the grace period of ``put`` (the default hour is ample); ``grace_seconds=0`` is for
offline maintenance with no concurrent writer.

Nothing inside the archive is followed through a symbolic link: directories are opened with
``O_NOFOLLOW`` and entries removed relative to them, and a symlink where the archive expects its own
folder raises :class:`~causalcache_memory.errors.ArchiveLayoutError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from causalcache_memory.archive._keys import (
    BLOBS,
    GC,
    GC_MARKER_STALE_SECONDS,
    RECORDS,
    REFS,
    TMP,
    blob_relpath,
    check_episode_id,
    check_hash,
    check_hashes,
    check_record_bytes,
    digest,
    gc_marker_name,
    is_hash,
    marker_is_stale,
    os_error,
    record_relpath,
    temp_name,
    temp_writer_is_dead,
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
from causalcache_memory.errors import ArchiveError, ArchiveLayoutError, BlobNotFoundError

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["TEMP_GRACE_SECONDS", "LocalArchive"]

#: Temporary files younger than this are never collected by age, whatever ``grace_seconds`` says: they
#: may belong to a write in flight. Files of writers that no longer run are removed at once.
TEMP_GRACE_SECONDS = 300.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_DIR_FD = os.unlink in os.supports_dir_fd and _NOFOLLOW != 0


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
        self.url = self.root.as_uri()
        for sub in (BLOBS, RECORDS, REFS, TMP, GC):
            folder = self.root / sub
            self._refuse_symlink(folder)
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise os_error(exc, f"cannot create archive folder {folder}") from exc
        with contextlib.suppress(OSError):
            self._sweep_tmp(cutoff=None)  # files of killed writers on this host

    def __repr__(self) -> str:
        return f"LocalArchive({str(self.root)!r})"

    # ------------------------------------------------------------------ symlink-safe directory access
    def _refuse_symlink(self, path: Path) -> None:
        if path.is_symlink():
            raise ArchiveLayoutError(
                f"{path} is a symbolic link; the archive never follows links inside its root. Remove the "
                f"link (to keep data on another disk, open the archive at a directory on that disk)"
            )

    @contextlib.contextmanager
    def _open_dir(self, path: Path) -> Iterator[int | None]:
        """A descriptor of directory ``path`` opened without following a symlink (None where unsupported)."""
        if not _DIR_FD:
            self._refuse_symlink(path)
            yield None
            return
        try:
            fd = os.open(path, os.O_RDONLY | _DIRECTORY | _NOFOLLOW)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR) and path.is_symlink():
                self._refuse_symlink(path)
            raise
        try:
            yield fd
        finally:
            os.close(fd)

    @staticmethod
    def _names(path: Path, fd: int | None) -> list[str]:
        """Names of the regular files in the open directory ``fd`` (symlinks and folders skipped)."""
        out = []
        for name in os.listdir(fd if fd is not None else path):
            try:
                st = (
                    os.stat(name, dir_fd=fd, follow_symlinks=False)
                    if fd is not None
                    else (path / name).lstat()
                )
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                out.append(name)
        return out

    def _list_dir(self, path: Path) -> list[str]:
        """Regular files in ``path`` (none if it is missing); a symlinked ``path`` raises."""
        try:
            with self._open_dir(path) as fd:
                return self._names(path, fd)
        except FileNotFoundError:
            return []

    @staticmethod
    def _unlink(path: Path, name: str, fd: int | None) -> None:
        with contextlib.suppress(FileNotFoundError):
            if fd is not None:
                os.unlink(name, dir_fd=fd)
            else:
                (path / name).unlink()

    # ------------------------------------------------------------------ writes
    def put(self, data: bytes | Image.Image) -> str:
        """Validate and store ``data`` unchanged; return its sha256 (an existing damaged copy is repaired)."""
        raw = to_bytes(data)
        validate_image_bytes(raw, max_pixels=self.max_pixels, formats=self.formats)
        sha = digest(raw)
        self._store(self._blob(sha), raw, sha, "blob")
        return sha

    def put_record(self, data: bytes) -> str:
        """Store a small record (any bytes, not image-validated) atomically; return its sha256."""
        raw = check_record_bytes(data)
        sha = digest(raw)
        self._store(self.root / record_relpath(sha), raw, sha, "record")
        return sha

    def _store(self, path: Path, raw: bytes, sha: str, kind: str) -> None:
        """Make ``path`` hold ``raw`` with a fresh mtime and no collector deciding on it (see module doc)."""
        for _ in range(8):
            if not self._refresh_if_intact(path, sha, kind):
                self._write_atomic(path, raw, kind)
            self._wait_for_collectors(sha)
            if self._is_regular(path):
                return
        raise ArchiveError(
            f"could not keep {kind} {sha} in archive {self.url}: it was deleted again after 8 writes; is a "
            "gc with grace_seconds=0 running against live writers?"
        )

    @staticmethod
    def _is_regular(path: Path) -> bool:
        try:
            return stat.S_ISREG(path.lstat().st_mode)
        except FileNotFoundError:
            return False

    def _refresh_if_intact(self, path: Path, sha: str, kind: str) -> bool:
        """True if ``path`` holds bytes hashing to ``sha`` and its mtime was refreshed; False to (re)write."""
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return False  # a symlink where an object belongs: replaced by the atomic write
            raise os_error(exc, f"cannot read {kind} {sha} in archive {self.url}") from exc
        try:
            with os.fdopen(fd, "rb") as fh:
                intact = digest(fh.read()) == sha
        except OSError as exc:
            raise os_error(exc, f"cannot read {kind} {sha} in archive {self.url}") from exc
        if not intact:
            return False
        try:
            os.utime(path, follow_symlinks=False)  # refresh the gc grace period
        except FileNotFoundError:
            return False  # collected meanwhile: write it again
        except OSError as exc:
            raise os_error(exc, f"cannot refresh {kind} {sha} in archive {self.url}") from exc
        return True

    def _write_atomic(self, path: Path, raw: bytes, kind: str) -> None:
        tmp = self.root / TMP / temp_name(path.name)
        try:
            with open(tmp, "xb") as fh:
                fh.write(raw)
                fh.flush()
                os.fsync(fh.fileno())
            self._refuse_symlink(path.parent)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(tmp, path)
            except PermissionError:
                # Windows refuses to replace a file another process holds open; same bytes are there.
                if not path.is_file():
                    raise
            _fsync_dir(path.parent)
        except OSError as exc:
            raise os_error(exc, f"could not write {kind} {path.name} under {self.root}") from exc
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()

    def _wait_for_collectors(self, sha: str) -> None:
        """Return once no live ``gc`` marker names ``sha`` (stale markers of dead collectors are removed)."""
        deadline = time.monotonic() + 2 * GC_MARKER_STALE_SECONDS
        folder = self.root / GC
        while True:
            pending = [n for n in self._list_dir(folder) if n.startswith(sha + ".")]
            if not pending:
                return
            for name in pending:
                if marker_is_stale(name):
                    with contextlib.suppress(FileNotFoundError):
                        (folder / name).unlink()
            if time.monotonic() > deadline:
                raise ArchiveError(f"a gc has held object {sha} in archive {self.url} for over a minute")
            time.sleep(0.002)

    # ------------------------------------------------------------------ reads
    def _blob(self, sha256: str) -> Path:
        return self.root / blob_relpath(sha256)

    def get_record(self, sha256: str) -> bytes:
        """The bytes of record ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self.root / record_relpath(check_hash(sha256)), sha256, "record")

    def has_record(self, sha256: object) -> bool:
        return is_hash(sha256) and self._is_regular(self.root / record_relpath(sha256))  # type: ignore[arg-type]

    def iter_records(self) -> Iterator[str]:
        """Every stored record hash (fan-out order, not sorted)."""
        return self._iter_fanout(RECORDS)

    def get_bytes(self, sha256: str) -> bytes:
        """The original bytes of blob ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self._blob(check_hash(sha256)), sha256, "blob")

    def _read_verified(self, path: Path, sha256: str, kind: str) -> bytes:
        try:
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            raise BlobNotFoundError(f"{kind} {sha256} is not in archive {self.url}") from None
        except OSError as exc:
            raise os_error(exc, f"could not read {kind} {sha256} from {path}") from exc
        return verified(raw, sha256, kind=kind, url=self.url, location=str(path))

    def open_image(self, sha256: str) -> Image.Image:
        """Lazily decoded image of blob ``sha256`` (integrity-checked, pixel limit enforced)."""
        return open_image_bytes(self.get_bytes(sha256), max_pixels=self.max_pixels, formats=self.formats)

    def __contains__(self, sha256: object) -> bool:
        return is_hash(sha256) and self._is_regular(self._blob(sha256))  # type: ignore[arg-type]

    def iter_hashes(self) -> Iterator[str]:
        """Every stored blob hash (fan-out order, not sorted)."""
        return self._iter_fanout(BLOBS)

    def _iter_fanout(self, sub: str) -> Iterator[str]:
        base = self.root / sub
        try:
            fans = sorted(
                (e for e in os.scandir(base) if e.is_dir(follow_symlinks=False)), key=lambda e: e.name
            )
        except FileNotFoundError:
            return
        for fan in fans:
            for name in self._list_dir(Path(fan.path)):
                if is_hash(name) and name[:2] == fan.name:
                    yield name

    def size_bytes(self, sha256: str) -> int:
        """Stored size of blob ``sha256`` in bytes."""
        try:
            return self._blob(check_hash(sha256)).lstat().st_size
        except FileNotFoundError:
            raise BlobNotFoundError(f"blob {sha256} is not in archive {self.url}") from None

    # ------------------------------------------------------------------ retention
    def _object_path(self, sha: str) -> Path | None:
        for path in (self._blob(sha), self.root / record_relpath(sha)):
            if self._is_regular(path):
                return path
        return None

    def retain(self, episode_id: str, hashes: Iterable[str]) -> None:
        """Record that ``episode_id`` references ``hashes`` (all validated before anything is written).

        Objects already stored get a fresh mtime, and ``retain`` waits out a ``gc`` deciding on them;
        an object such a ``gc`` deleted meanwhile raises :class:`BlobNotFoundError` (put it again).
        """
        folder = self.root / REFS / check_episode_id(episode_id)
        wanted = check_hashes(hashes)
        self._refuse_symlink(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | _NOFOLLOW
            with self._open_dir(folder) as fd:
                for sha in wanted:
                    os.close(
                        os.open(sha, flags, 0o644, dir_fd=fd)
                        if fd is not None
                        else os.open(folder / sha, flags)
                    )
            for sha in wanted:
                path = self._object_path(sha)
                if path is None:
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.utime(path, follow_symlinks=False)
                self._wait_for_collectors(sha)
                if not self._is_regular(path):
                    raise BlobNotFoundError(
                        f"object {sha} was collected by a concurrent gc while episode {episode_id!r} "
                        "retained it; put it again"
                    )
        except OSError as exc:
            raise os_error(exc, f"cannot record references of episode {episode_id!r} under {folder}") from exc

    def release(self, episode_id: str) -> None:
        """Forget every reference of ``episode_id`` (its blobs become collectable). Never follows links."""
        folder = self.root / REFS / check_episode_id(episode_id)
        try:
            if not folder.is_symlink() and not folder.is_dir():
                return
            with self._open_dir(folder) as fd:
                for name in self._names(folder, fd):
                    self._unlink(folder, name, fd)
            with contextlib.suppress(OSError):  # a concurrent retain may have added a marker: keep it
                folder.rmdir()
        except ArchiveLayoutError:
            raise
        except OSError as exc:
            raise os_error(exc, f"cannot release episode {episode_id!r} under {folder}") from exc

    def live_episodes(self) -> list[str]:
        """Episodes with a folder of references (symlinked folders are not episodes)."""
        try:
            return sorted(e.name for e in os.scandir(self.root / REFS) if e.is_dir(follow_symlinks=False))
        except OSError as exc:
            raise os_error(exc, f"cannot list episodes of archive {self.url}") from exc

    def references(self, episode_id: str) -> set[str]:
        """Hashes retained by ``episode_id``."""
        folder = self.root / REFS / check_episode_id(episode_id)
        return {name for name in self._list_dir(folder) if is_hash(name)}

    def _episode_mtime(self, episode_id: str) -> float | None:
        folder = self.root / REFS / check_episode_id(episode_id)
        try:
            st = folder.lstat()
        except FileNotFoundError:
            return None
        return st.st_mtime if stat.S_ISDIR(st.st_mode) else None

    def _referenced(self) -> set[str]:
        refs: set[str] = set()
        for episode in self.live_episodes():
            refs |= self.references(episode)
        return refs

    # ------------------------------------------------------------------ collection
    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        """Delete blobs and records no live episode references, older than ``grace_seconds`` (by mtime).

        Also removes temporary files of writers that no longer run, and any older than
        ``max(grace_seconds, TEMP_GRACE_SECONDS)``. ``dry_run`` reports what would be deleted and deletes
        nothing. Each deletion follows the marker rule of the module docstring.
        """
        if not grace_seconds >= 0:
            raise ValueError(f"grace_seconds={grace_seconds!r} must be >= 0")
        for sub in (BLOBS, RECORDS, REFS, TMP, GC):
            self._refuse_symlink(self.root / sub)
        live = self._referenced()
        kept = deleted = freed = recent = 0
        stored = [(sha, self._blob(sha)) for sha in self.iter_hashes()]
        stored += [(sha, self.root / record_relpath(sha)) for sha in self.iter_records()]
        for sha, path in stored:
            if sha in live:
                kept += 1
                continue
            outcome, size = self._collect(sha, path, grace_seconds, dry_run)
            if outcome == "recent":
                recent += 1
            elif outcome == "deleted":
                deleted += 1
                freed += size
        if not dry_run:
            self._sweep_tmp(time.time() - max(grace_seconds, TEMP_GRACE_SECONDS))
        return GCReport(kept=kept, deleted=deleted, bytes_freed=freed, skipped_recent=recent)

    def _collect(self, sha: str, path: Path, grace: float, dry_run: bool) -> tuple[str, int]:
        """Delete one unreferenced object if it is still old once a marker announces the decision."""
        marker = self.root / GC / gc_marker_name(sha)
        if not dry_run:
            try:
                os.close(os.open(marker, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644))
            except OSError as exc:
                raise os_error(exc, f"cannot write gc marker {marker}") from exc
        try:
            try:
                st = path.lstat()
            except FileNotFoundError:
                return "gone", 0
            if time.time() - st.st_mtime < grace:
                return "recent", 0
            if not dry_run:
                try:
                    path.unlink()
                except FileNotFoundError:
                    return "gone", 0
                except OSError as exc:
                    raise os_error(exc, f"cannot delete {path}") from exc
            return "deleted", st.st_size
        finally:
            if not dry_run:
                with contextlib.suppress(FileNotFoundError):
                    marker.unlink()

    def _sweep_tmp(self, cutoff: float | None) -> int:
        """Remove temp files of dead writers on this host, and (``cutoff`` given) any older than it."""
        folder = self.root / TMP
        removed = 0
        with self._open_dir(folder) as fd:
            for name in self._names(folder, fd):
                try:
                    st = (
                        os.stat(name, dir_fd=fd, follow_symlinks=False)
                        if fd is not None
                        else (folder / name).lstat()
                    )
                except FileNotFoundError:
                    continue
                if temp_writer_is_dead(name) or (cutoff is not None and st.st_mtime < cutoff):
                    self._unlink(folder, name, fd)
                    removed += 1
        return removed

    # ------------------------------------------------------------------ maintenance (causalcache archive check)
    def _discard(self, kind: str, sha: str) -> None:
        """Delete a damaged object so the next ``put`` of its bytes stores it afresh."""
        path = self._blob(sha) if kind == "blob" else self.root / record_relpath(sha)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()

    def _layout_problems(self) -> list[str]:
        """Symlinks (never followed) where the archive keeps its own files and folders."""
        problems = []
        for sub in (BLOBS, RECORDS, REFS, TMP, GC):
            base = self.root / sub
            if base.is_symlink():
                problems.append(f"{base} is a symbolic link")
                continue
            with contextlib.suppress(FileNotFoundError):
                for entry in os.scandir(base):
                    if entry.is_symlink():
                        problems.append(f"{entry.path} is a symbolic link")
                    elif entry.is_dir(follow_symlinks=False) and sub in (BLOBS, RECORDS, REFS):
                        problems += [
                            f"{e.path} is a symbolic link" for e in os.scandir(entry.path) if e.is_symlink()
                        ]
        return problems

    def _temp_files(self) -> int:
        return sum(1 for _ in self._list_dir(self.root / TMP))
