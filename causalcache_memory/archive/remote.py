"""Archive backend on any fsspec URL (``s3://``, ``gs://``, ``az://``, ``memory://`` ...).

Same layout and contract as :class:`~causalcache_memory.archive.local.LocalArchive`, so many agent
workers on different machines can share one archive:

* on object stores (S3, GCS, Azure, ``memory://``) a blob is written with one ``pipe_file`` of the whole
  object: a single PUT is atomic per object, readers see the old state or the complete object, never a
  prefix. On every other filesystem (``local://``, SFTP, SMB, WebDAV, FUSE mounts) the bytes go to a
  temporary file under ``tmp/`` that is then renamed (``fs.mv``) onto the final name, and parent folders
  are created first (``local://`` needs no ``auto_mkdir``). ``atomic_put=True/False`` overrides the choice.
* an existing object is never trusted: every ``put`` rewrites the whole object with that atomic method.
  A torn object left by a killed writer is therefore repaired by the next ``put`` of the same bytes, and
  the rewrite refreshes the modification time that ``gc`` reads. A duplicate costs one upload;
  the object is still stored once.
* ``gc`` and writers follow the marker rule of :mod:`causalcache_memory.archive.local` (marker
  ``gc/<sha256>.*`` written before the collector re-reads the object's time; ``put`` waits while a marker
  names its object and then checks the object exists): a returned ``put`` is never collected.
* every read is re-hashed (``BlobCorruptError`` on mismatch); storage errors are named
  (:class:`~causalcache_memory.errors.ArchiveUnavailableError`, ``ArchivePermissionError``);
* retention markers are empty objects ``refs/<episode>/<sha256>``; ``gc`` lists ``blobs/``, ``records/``
  and ``refs/``.
* small JSON records (trace chain nodes, :mod:`causalcache_memory.trace.store`) live under
  ``records/ab/<sha256>`` with the same whole-object write, de-duplication and re-hash on read, without
  image validation; retention and ``gc`` treat them like blobs.
  Blob age comes from the store's modification/creation time; objects without one are treated as old.
* screen text (:meth:`FsspecArchive.put_text`) lives under ``texts/ab/<sha256>``, keyed by its blob's
  hash (:mod:`~causalcache_memory.archive._texts`); ``gc`` deletes it with its blob.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import time
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive._deadline import DEFAULT_TIMEOUT_S, BoundedFS, storage_timeouts
from causalcache_memory.archive._keys import (
    BLOBS,
    GC,
    GC_MARKER_STALE_SECONDS,
    RECORDS,
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
from causalcache_memory.archive._remote_gc import FsspecCollection
from causalcache_memory.archive._remote_refs import FsspecRetention
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
from causalcache_memory.errors import (
    ArchiveError,
    ArchiveUnavailableError,
    BlobNotFoundError,
    CausalCacheError,
)

if TYPE_CHECKING:
    from PIL import Image

__all__ = ["OBJECT_STORE_PROTOCOLS", "FsspecArchive"]

#: fsspec protocols whose single whole-object write is atomic (no rename needed).
OBJECT_STORE_PROTOCOLS = frozenset(
    {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "oss", "memory", "r2", "b2", "cos", "tos"}
)


class FsspecArchive(FsspecRetention, FsspecCollection):
    """Content-addressed screenshot archive on an fsspec filesystem.

    Args:
        url: archive root, e.g. ``"s3://bucket/screens"`` or ``"memory://tests/run-1"``.
        max_pixels: largest accepted ``width * height``; also enforced on every decode.
        formats: accepted container formats, a subset of ``("PNG", "JPEG", "WEBP")``.
        atomic_put: True = one whole-object write is atomic on this store; False = write a temporary
            file and rename it; None (default) = True exactly for :data:`OBJECT_STORE_PROTOCOLS`.
        timeout_s: deadline of each storage call (:mod:`~causalcache_memory.archive._deadline`); past it
            the call raises :class:`~causalcache_memory.errors.ArchiveTimeoutError`. None = no deadline.
        **storage_options: passed to fsspec (credentials, endpoint, ...).
    """

    def __init__(
        self,
        url: str,
        *,
        max_pixels: int = DEFAULT_MAX_PIXELS,
        formats: Iterable[str] = DEFAULT_FORMATS,
        atomic_put: bool | None = None,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        **storage_options: Any,
    ) -> None:
        from fsspec.core import split_protocol, url_to_fs

        if timeout_s is not None and not (isinstance(timeout_s, (int, float)) and 0 < timeout_s < 1e6):
            raise ArchiveError(
                f"timeout_s={timeout_s!r} must be a number of seconds > 0 (or None: no deadline)"
            )
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        storage_timeouts((split_protocol(url)[0] or "",), self.timeout_s, storage_options)
        self.max_pixels = check_max_pixels(max_pixels)
        self.formats = check_formats(formats)
        self.url = url
        try:
            self.fs, root = url_to_fs(url, **storage_options)
        except (ImportError, ValueError) as exc:
            raise ArchiveError(f"cannot open archive url={url!r}: {exc}") from exc
        except OSError as exc:
            raise os_error(exc, f"cannot open archive url={url!r}") from exc
        self.root = root.rstrip("/")
        self._fs = BoundedFS(self.fs, self.timeout_s, url)
        protocols = self.fs.protocol if isinstance(self.fs.protocol, (tuple, list)) else (self.fs.protocol,)
        self.atomic_put = bool(set(protocols) & OBJECT_STORE_PROTOCOLS) if atomic_put is None else atomic_put

    def __repr__(self) -> str:
        return f"FsspecArchive({self.url!r})"

    def child(self, relpath: str) -> FsspecArchive:
        """An archive of its own under ``url/relpath`` on the same filesystem (a tenant's: :mod:`.namespaces`)."""
        other = copy.copy(self)
        other.url = f"{self.url.rstrip('/')}/{relpath}"
        other.root = f"{self.root}/{relpath}"
        other._fs = BoundedFS(self.fs, self.timeout_s, other.url)
        return other

    @functools.cached_property
    def _refresh(self) -> dict[str, bool]:
        """``refresh=True`` where this filesystem's ``ls`` and ``info`` accept it (by name, as s3fs and
        gcsfs do, or through ``**kwargs``): bypass their caches. Others (SFTP) have no listing cache."""
        accepts = []
        for method in (self.fs.ls, self.fs.info):
            params: list[inspect.Parameter] = []
            try:
                params = list(inspect.signature(method).parameters.values())
            except (TypeError, ValueError):
                pass
            accepts.append(any(p.name == "refresh" or p.kind is p.VAR_KEYWORD for p in params))
        return {"refresh": True} if all(accepts) else {}

    def _path(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    @contextlib.contextmanager
    def _io(self, what: str) -> Iterator[None]:
        """Translate storage errors into named archive errors (``FileNotFoundError`` passes through)."""
        try:
            yield
        except (FileNotFoundError, CausalCacheError):  # ArchiveTimeoutError is an OSError: keep its name
            raise
        except OSError as exc:
            raise os_error(exc, f"{what} in archive {self.url}") from exc
        except (ImportError, ValueError, TypeError, AttributeError, KeyError, RuntimeError):
            raise
        except Exception as exc:  # botocore, aiohttp, paramiko errors are not OSError
            name = type(exc).__name__
            if "Connect" in name or "Timeout" in name or "Endpoint" in name:
                raise ArchiveUnavailableError(
                    f"{what} in archive {self.url}: the storage cannot be reached ({name}: {exc})"
                ) from exc
            raise ArchiveError(f"{what} in archive {self.url}: {name}: {exc}") from exc

    # ------------------------------------------------------------------ writes
    def put(self, data: bytes | Image.Image) -> StoredImage:
        """Validate and upload ``data`` unchanged (atomic whole-object write); return its sha256."""
        raw = to_bytes(data)
        info = validate_image_bytes(raw, max_pixels=self.max_pixels, formats=self.formats)
        sha = digest(raw)
        self._store(blob_relpath(sha), raw, sha, "blob")
        return StoredImage.of(sha, info, len(raw))

    def put_record(self, data: bytes) -> str:
        """Upload a small record (any bytes, not image-validated) atomically; return its sha256."""
        raw = check_record_bytes(data)
        sha = digest(raw)
        self._store(record_relpath(sha), raw, sha, "record")
        return sha

    def put_text(self, sha256: str, text: str) -> None:
        """Store ``text`` beside blob ``sha256`` (``texts/ab/<sha256>``); the first intact text stays.

        Raises :class:`BlobNotFoundError` when the blob is not stored and
        :class:`~causalcache_memory.errors.ScreenTextError` for text that is not a ``str`` or is over the
        cap. An intact text already there is written again unchanged (that refreshes its age, as every
        ``put`` does here); a damaged one is replaced (rules: :mod:`causalcache_memory.archive._texts`).
        """
        raw = encode_sidecar(sha256, text)
        if sha256 not in self:
            raise BlobNotFoundError(missing_blob(sha256, self.url))
        held = self._read_text(sha256)
        self._store(
            text_relpath(sha256), held if held is not None and text_is_intact(held) else raw, sha256, "text"
        )

    def _read_text(self, sha256: str) -> bytes | None:
        try:
            with self._io(f"could not read the text of blob {sha256}"):
                return bytes(self._fs.cat_file(self._path(text_relpath(sha256))))
        except FileNotFoundError:
            return None

    def get_text(self, sha256: str) -> str | None:
        """The text stored for blob ``sha256``; None when there is none (a damaged one raises)."""
        if not is_hash(sha256):
            return None
        raw = self._read_text(sha256)
        if raw is None:
            return None
        return decode_text(raw, sha256, url=self.url, location=self._path(text_relpath(sha256)))

    def iter_texts(self) -> Iterator[str]:
        """Every blob hash that has a stored text."""
        yield from sorted(self._list(TEXTS))

    def _store(self, rel: str, raw: bytes, sha: str, kind: str) -> None:
        """Write ``rel`` (W1), wait out collectors (W2), check it is still there (W3; a text also needs
        its blob: else ``BlobNotFoundError``)."""
        path = self._path(rel)
        for _ in range(8):
            self._write(path, raw, f"cannot write {kind} {sha}")
            self._wait_for_collectors(sha)
            if kind == "text" and sha not in self:
                raise BlobNotFoundError(missing_blob(sha, self.url))
            with self._io(f"cannot check {kind} {sha}"):
                if self._exists_fresh(path):
                    return
        raise ArchiveError(
            f"could not keep {kind} {sha} in archive {self.url}: it was deleted again after 8 writes; is a "
            "gc with grace_seconds=0 running against live writers?"
        )

    def _write(self, path: str, raw: bytes, what: str) -> None:
        """One atomic whole-object write (object stores) or temp file + rename (every other filesystem)."""
        with self._io(what):
            if self.atomic_put:
                self._fs.pipe_file(path, raw)
                return
            tmp = self._path(f"{TMP}/{temp_name(path.rsplit('/', 1)[-1])}")
            self._fs.makedirs(self._path(TMP), exist_ok=True)
            self._fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
            try:
                self._fs.pipe_file(tmp, raw)
                self._fs.mv(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    if self._fs.exists(tmp):
                        self._fs.rm_file(tmp)

    def _wait_for_collectors(self, sha: str) -> None:
        deadline = time.monotonic() + 2 * GC_MARKER_STALE_SECONDS
        folder = self._path(GC)
        while True:
            with self._io(f"cannot list gc markers of {sha}"):
                pending = [n for n in self._ls_names(folder) if n.startswith(sha + ".")]
            if not pending:
                return
            for name in pending:
                if marker_is_stale(name):
                    with contextlib.suppress(FileNotFoundError), self._io("cannot remove a stale gc marker"):
                        self._fs.rm_file(f"{folder}/{name}")
            if time.monotonic() > deadline:
                raise ArchiveError(f"a gc has held object {sha} in archive {self.url} for over a minute")
            time.sleep(0.005)

    # ------------------------------------------------------------------ reads
    def get_record(self, sha256: str) -> bytes:
        """The bytes of record ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self._path(record_relpath(check_hash(sha256))), sha256, "record")

    def has_record(self, sha256: object) -> bool:
        if not is_hash(sha256):
            return False
        with self._io(f"cannot check record {sha256}"):
            return self._exists_fresh(self._path(record_relpath(sha256)))  # type: ignore[arg-type]

    def iter_records(self) -> Iterator[str]:
        yield from sorted(self._list(RECORDS))

    def get_bytes(self, sha256: str) -> bytes:
        """The original bytes of blob ``sha256``, re-hashed: raises on absence or corruption."""
        return self._read_verified(self._path(blob_relpath(check_hash(sha256))), sha256, "blob")

    def _read_verified(self, path: str, sha256: str, kind: str) -> bytes:
        try:
            with self._io(f"could not read {kind} {sha256}"):
                raw = bytes(self._fs.cat_file(path))
        except FileNotFoundError:
            raise BlobNotFoundError(f"{kind} {sha256} is not in archive {self.url}") from None
        return verified(raw, sha256, kind=kind, url=self.url, location=path)

    def open_image(self, sha256: str) -> Image.Image:
        """Lazily decoded image of blob ``sha256`` (integrity-checked, pixel limit enforced)."""
        return open_image_bytes(self.get_bytes(sha256), max_pixels=self.max_pixels, formats=self.formats)

    def __contains__(self, sha256: object) -> bool:
        if not is_hash(sha256):
            return False
        with self._io(f"cannot check blob {sha256}"):
            return self._exists_fresh(self._path(blob_relpath(sha256)))  # type: ignore[arg-type]

    def _list_blobs(self) -> dict[str, Mapping[str, Any]]:
        return self._list(BLOBS)

    def _list(self, sub: str) -> dict[str, Mapping[str, Any]]:
        try:
            with self._io(f"cannot list {sub}/"):
                self._fs.invalidate_cache(self._path(sub))
                found = self._fs.find(self._path(sub), detail=True)
        except FileNotFoundError:
            return {}
        out = {}
        for path, info in found.items():
            name = path.rstrip("/").rsplit("/", 1)[-1]
            if is_hash(name) and info.get("type", "file") == "file" and not info.get("islink"):
                out[name] = info
        return out

    def iter_hashes(self) -> Iterator[str]:
        yield from sorted(self._list_blobs())

    def size_bytes(self, sha256: str) -> int:
        try:
            with self._io(f"cannot stat blob {sha256}"):
                return int(self._fs.size(self._path(blob_relpath(check_hash(sha256)))))
        except FileNotFoundError:
            raise BlobNotFoundError(f"blob {sha256} is not in archive {self.url}") from None

    # ------------------------------------------------------------------ fresh reads
    def _exists_fresh(self, path: str) -> bool:
        """Whether ``path`` exists now, asked of the storage itself (never of a listing cache)."""
        self._fs.invalidate_cache(path)
        try:
            self._fs.info(path, **self._refresh)
        except FileNotFoundError:
            return False
        return True

    def _ls_names(self, path: str, *, files_only: bool = False) -> list[str]:
        """Names under ``path``, listed by the storage now: fsspec's listing cache (s3fs, gcsfs keep one
        per process) would hide what other processes wrote or removed since, and every caller decides
        deletion or liveness from this answer (docs/RELIABILITY.md, "the proof")."""
        self._fs.invalidate_cache(path)
        try:
            entries = self._fs.ls(path, detail=True, **self._refresh)
        except FileNotFoundError:
            return []
        names = []
        for e in entries:
            if files_only and (e.get("type", "file") != "file" or e.get("islink")):
                continue
            names.append(str(e["name"]).rstrip("/").rsplit("/", 1)[-1])
        return names
