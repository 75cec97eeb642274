"""The default archive backend: a local directory, safe for concurrent threads and processes.

Writes go to a unique temporary file under ``root/tmp`` (same filesystem), are flushed and fsynced, then
``os.replace``-d into ``root/blobs/ab/<sha256>``; the directory entry is fsynced on POSIX. Readers never
see partial blobs, and two writers of the same bytes race harmlessly (both rename identical content).
Retention uses one empty marker file per (episode, blob), so ``retain`` from many processes needs no lock
and no read-modify-write.

Small JSON records (the nodes of a hash-chained trace, :mod:`causalcache_memory.trace.store`) use the same
atomic write, de-duplication and integrity check under ``root/records/ab/<sha256>``, without image
validation; ``retain`` and ``gc`` treat a record hash exactly like a blob hash.

Screen text (:meth:`LocalArchive.put_text`) lives beside its blob under ``root/texts/ab/<sha256>``, keyed
by the blob's hash, with the same atomic write and a re-hashed body (:mod:`~causalcache_memory.archive._texts`);
``gc`` deletes it with its blob.

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
``ONOFOLLOW`` and entries removed relative to them, and a symlink where the archive expects its own
folder raises :class:`~causalcache_memory.errors.ArchiveLayoutError`.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable, Iterable, Iterator
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
    check_hash,
    check_record_bytes,
    digest,
    is_hash,
    marker_is_stale,
    os_error,
    record_relpath,
    temp_name,
    verified,
)
from causalcache_memory.archive._local_gc import TEMP_GRACE_SECONDS, LocalCollection
from causalcache_memory.archive._local_refs import LocalRetention
from causalcache_memory.archive._localfs import (
    NOFOLLOW,
    fsync_dir,
    is_regular,
    list_dir,
    refuse_symlink,
)
from causalcache_memory.archive._texts import (
    TEXTS,
    decode_text,
    encode_sidecar,
    missing_blob,
    text_is_intact,
    text_relpath,
)
from causalcache_memory.archive.base import StoredImage
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


class LocalArchive(LocalRetention, LocalCollection):
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
        for sub in (BLOBS, RECORDS, TEXTS, REFS, TMP, GC):
            folder = self.root / sub
            refuse_symlink(folder)
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise os_error(exc, f"cannot create archive folder {folder}") from exc
        with contextlib.suppress(OSError):
            self._sweep_tmp(cutoff=None)  # files of killed writers on this host

    def __repr__(self) -> str:
        return f"LocalArchive({str(self.root)!r})"

    def child(self, relpath: str) -> LocalArchive:
        """An archive of its own under ``root/relpath`` (a tenant's: :mod:`.namespaces`)."""
        return LocalArchive(self.root / relpath, max_pixels=self.max_pixels, formats=self.formats)

    # ------------------------------------------------------------------ writes
    def put(self, data: bytes | Image.Image) -> StoredImage:
        """Validate and store ``data`` unchanged; return its sha256 (an existing damaged copy is repaired)."""
        raw, stored = self.check_image(data)
        self.store_image(raw, stored)
        return stored

    def check_image(self, data: bytes | Image.Image, *, decode: bool = True) -> tuple[bytes, StoredImage]:
        """The first half of :meth:`put`: the bytes to store, validated and hashed (nothing written).

        ``decode=False`` leaves out the full pixel decode; the caller must then run
        :func:`~causalcache_memory.archive.images.check_pixels` before :meth:`store_image`.
        """
        raw = to_bytes(data)
        info = validate_image_bytes(raw, max_pixels=self.max_pixels, formats=self.formats, decode=decode)
        return raw, StoredImage.of(digest(raw), info, len(raw))

    def store_image(self, raw: bytes, stored: StoredImage) -> None:
        """The second half of :meth:`put`: write ``raw`` (checked by :meth:`check_image`) durably."""
        self._store(self._blob(stored.sha256), raw, stored.sha256, "blob")

    def put_record(self, data: bytes) -> str:
        """Store a small record (any bytes, not image-validated) atomically; return its sha256."""
        raw = check_record_bytes(data)
        sha = digest(raw)
        self._store(self.root / record_relpath(sha), raw, sha, "record")
        return sha

    def put_text(self, sha256: str, text: str) -> None:
        """Store ``text`` beside blob ``sha256`` (``texts/ab/<sha256>``); the first intact text stays.

        Raises :class:`BlobNotFoundError` when the blob is not stored and
        :class:`~causalcache_memory.errors.ScreenTextError` for text that is not a ``str`` or is over
        :data:`~causalcache_memory.archive._texts.MAX_TEXT_BYTES`. A second call for a blob whose text
        is intact keeps that text and refreshes its mtime (rules: :mod:`causalcache_memory.archive._texts`).
        """
        raw = encode_sidecar(sha256, text)
        if sha256 not in self:
            raise BlobNotFoundError(missing_blob(sha256, self.url))
        self._store(self.root / text_relpath(sha256), raw, sha256, "text", intact=text_is_intact)

    def get_text(self, sha256: str) -> str | None:
        """The text stored for blob ``sha256``; None when there is none (a damaged one raises)."""
        if not is_hash(sha256):
            return None
        path = self.root / text_relpath(sha256)
        try:
            fd = os.open(path, os.O_RDONLY | NOFOLLOW)
            with os.fdopen(fd, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return None  # a symlink is never followed (check reports it)
            raise os_error(exc, f"could not read the text of blob {sha256} from {path}") from exc
        return decode_text(raw, sha256, url=self.url, location=str(path))

    def iter_texts(self) -> Iterator[str]:
        """Every blob hash that has a stored text (fan-out order, not sorted)."""
        return self._iter_fanout(TEXTS)

    def _store(
        self, path: Path, raw: bytes, sha: str, kind: str, *, intact: Callable[[bytes], bool] | None = None
    ) -> None:
        """Make ``path`` hold ``raw`` with a fresh mtime and no collector deciding on it (see module doc).

        ``intact`` says whether bytes already there may stay (default: they hash to ``sha``). A text
        (``kind="text"``) also needs its blob after the wait: else ``BlobNotFoundError``.
        """
        for _ in range(8):
            if not self._refresh_if_intact(path, sha, kind, intact):
                self._write_atomic(path, raw, kind)
            self._wait_for_collectors(sha)
            if kind == "text" and sha not in self:
                raise BlobNotFoundError(missing_blob(sha, self.url))
            if is_regular(path):
                return
        raise ArchiveError(
            f"could not keep {kind} {sha} in archive {self.url}: it was deleted again after 8 writes; is a "
            "gc with grace_seconds=0 running against live writers?"
        )

    def _refresh_if_intact(
        self, path: Path, sha: str, kind: str, intact: Callable[[bytes], bool] | None = None
    ) -> bool:
        """True if ``path`` holds bytes hashing to ``sha`` and its mtime was refreshed; False to (re)write."""
        try:
            fd = os.open(path, os.O_RDONLY | NOFOLLOW)
        except FileNotFoundError:
            return False
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return False  # a symlink where an object belongs: replaced by the atomic write
            raise os_error(exc, f"cannot read {kind} {sha} in archive {self.url}") from exc
        try:
            with os.fdopen(fd, "rb") as fh:
                held = fh.read()
        except OSError as exc:
            raise os_error(exc, f"cannot read {kind} {sha} in archive {self.url}") from exc
        if not (intact(held) if intact is not None else digest(held) == sha):
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
            refuse_symlink(path.parent)
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(tmp, path)
            except PermissionError:
                # Windows refuses to replace a file another process holds open; same bytes are there.
                if not path.is_file():
                    raise
            fsync_dir(path.parent)
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
            pending = [n for n in list_dir(folder) if n.startswith(sha + ".")]
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
        return is_hash(sha256) and is_regular(self.root / record_relpath(sha256))  # type: ignore[arg-type]

    def iter_records(self) -> Iterator[str]:
        """Every stored record hash (fan-out order, not sorted)."""
        return self._iter_fanout(RECORDS)

    def get_bytes(self, sha256: str) -> bytes:
        """The original bytes of blob ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self._blob(check_hash(sha256)), sha256, "blob")

    def _read_verified(self, path: Path, sha256: str, kind: str) -> bytes:
        try:
            fd = os.open(path, os.O_RDONLY | NOFOLLOW)
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
        return is_hash(sha256) and is_regular(self._blob(sha256))  # type: ignore[arg-type]

    def blob_stamp(self, sha256: str) -> tuple[int, int, int] | None:
        """``(inode, size, mtime_ns)`` of the stored blob (None when absent): changes when the file does.

        Lets a reader reuse what it derived from verified bytes (the wire encoding of a screenshot,
        :mod:`causalcache_memory.render.messages`) while the file is untouched, and re-read, re-verify
        and fail loudly once anything replaced or damaged it.
        """
        try:
            st = os.stat(self._blob(check_hash(sha256)), follow_symlinks=False)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise os_error(exc, f"cannot stat blob {sha256} in archive {self.url}") from exc
        return st.st_ino, st.st_size, st.st_mtime_ns

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
            for name in list_dir(Path(fan.path)):
                if is_hash(name) and name[:2] == fan.name:
                    yield name

    def size_bytes(self, sha256: str) -> int:
        """Stored size of blob ``sha256`` in bytes."""
        try:
            return self._blob(check_hash(sha256)).lstat().st_size
        except FileNotFoundError:
            raise BlobNotFoundError(f"blob {sha256} is not in archive {self.url}") from None
