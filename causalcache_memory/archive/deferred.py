"""Screenshot writes that overlap the model call, behind a barrier that commits wait for.

:class:`DeferredArchive` wraps an archive that splits ``put`` into a check and a store
(:class:`~causalcache_memory.archive.local.LocalArchive`: ``check_image`` / ``store_image``). Its
``put`` checks the screenshot's format, header, pixel count and structure and hashes it on the caller's
thread (an image that fails these is refused there, as by any ``put``), keeps the bytes in memory and
hands the full pixel decode (:func:`~causalcache_memory.archive.images.check_decodes`, the costly part
of validation) and the durable write (temporary file, ``fsync``, atomic rename, directory ``fsync``) to
one background thread. A screenshot whose pixel data does not decode is never written: its
:class:`~causalcache_memory.errors.ImageRejectedError` is raised by the next :meth:`flush`, so the step
that took it fails before anything that references it is committed. Until the write lands, reads of that hash are
served from the kept bytes (they were hashed, so they are the blob), so the step goes on to render the
prompt and call the model while the disk works.

The guarantee (docs/RELIABILITY.md, "Screenshot writes overlap the model call"): nothing that references
a screenshot is committed before the screenshot is durable. :meth:`DeferredArchive.flush` returns once
every write handed over so far is durable (re-raising the first failure); the memory calls it before a
checkpoint is persisted (its checkpointer waits on it) and, with any other checkpointer, before a node
returns. Trace-chain records and retention markers are written at once: a record is reachable only
through a checkpoint, so one naming a screenshot that a crash lost is never reached (``gc`` collects it).

While a write is in flight, :meth:`DeferredArchive.blob_stamp` is ``("kept", sha256)``: a wire
encoding built from the kept bytes is cached under it. When the write lands, the writer thread moves
that encoding to the file's own stamp (:meth:`~causalcache_memory.render.messages.WireCache.restamp`)
or, if no step has encoded the screenshot yet, encodes the kept bytes itself: each screenshot is
base64-encoded once, and the step that sends it never re-reads or re-hashes the file.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TYPE_CHECKING, Any

from causalcache_memory.archive.images import check_decodes, open_image_bytes

if TYPE_CHECKING:
    from PIL import Image

    from causalcache_memory.archive.base import GCReport, StoredImage

__all__ = ["DeferredArchive", "can_defer"]


def can_defer(archive: object) -> bool:
    """Whether ``archive`` splits ``put`` into ``check_image``/``store_image`` (then it can be wrapped)."""
    return callable(getattr(archive, "check_image", None)) and callable(getattr(archive, "store_image", None))


class DeferredArchive:
    """An archive view whose screenshot writes run on a background thread (see the module docstring)."""

    def __init__(self, inner: Any) -> None:
        if not can_defer(inner):
            raise TypeError(f"{type(inner).__name__} has no check_image/store_image; use it directly")
        self.inner = inner
        self.url = inner.url
        self.max_pixels = getattr(inner, "max_pixels", None)
        self.formats = getattr(inner, "formats", None)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="causalcache-write")
        self._lock = threading.Lock()
        self._pending: dict[str, tuple[bytes, Future[None]]] = {}
        self._failed: BaseException | None = None

    def __repr__(self) -> str:
        return f"DeferredArchive({self.inner!r})"

    # ------------------------------------------------------------------ writes
    def put(self, data: bytes | Image.Image) -> StoredImage:
        """Check and hash now; decode and write (durably) in the background. See :meth:`flush`."""
        raw, stored = self.inner.check_image(data, decode=False)
        with self._lock:
            if stored.sha256 not in self._pending:
                future = self._pool.submit(self._write, raw, stored)
                self._pending[stored.sha256] = (raw, future)
        return stored

    def _write(self, raw: bytes, stored: StoredImage) -> None:
        try:
            check_decodes(raw, stored.format, max_pixels=self.inner.max_pixels)
            self.inner.store_image(raw, stored)
            self._encode_for_the_wire(raw, stored.sha256)
        except BaseException as exc:
            with self._lock:
                self._failed = self._failed or exc
            raise
        finally:
            with self._lock:
                self._pending.pop(stored.sha256, None)

    def _encode_for_the_wire(self, raw: bytes, sha: str) -> None:
        """Leave the landed file's wire encoding in the cache, built from the bytes hashed by ``put``.

        Done here, off the step's critical path: the step that renders this screenshot next neither
        re-reads nor re-hashes nor re-encodes it. An encoding the step already made from the kept
        bytes is moved to the file's stamp instead of being made again.
        """
        from causalcache_memory.render.messages import WIRE_CACHE, data_url_of

        landed = self.inner.blob_stamp(sha)
        WIRE_CACHE.restamp(self.url, sha, ("kept", sha), landed)
        if landed is not None and WIRE_CACHE.get((self.url, sha, landed)) is None:
            WIRE_CACHE.put((self.url, sha, landed), data_url_of(raw))

    def flush(self) -> None:
        """Return once every screenshot handed to :meth:`put` so far is durable; re-raise a failure."""
        with self._lock:
            futures = [future for _, future in self._pending.values()]
        wait(futures)
        with self._lock:
            failed, self._failed = self._failed, None
        if failed is not None:
            raise failed

    def close(self) -> None:
        """Finish the writes handed over, then stop the writer thread (idempotent)."""
        self._pool.shutdown(wait=True)

    def put_record(self, data: bytes) -> str:
        return str(self.inner.put_record(data))

    def retain(self, episode_id: str, hashes: Iterable[str]) -> None:
        self.inner.retain(episode_id, hashes)

    # ------------------------------------------------------------------ reads (kept bytes first)
    def _kept(self, sha256: object) -> bytes | None:
        with self._lock:
            entry = self._pending.get(sha256) if isinstance(sha256, str) else None
        return entry[0] if entry is not None else None

    def get_bytes(self, sha256: str) -> bytes:
        kept = self._kept(sha256)
        return kept if kept is not None else bytes(self.inner.get_bytes(sha256))

    def open_image(self, sha256: str) -> Image.Image:
        kept = self._kept(sha256)
        if kept is None:
            return self.inner.open_image(sha256)
        return open_image_bytes(kept, max_pixels=self.inner.max_pixels, formats=self.inner.formats)

    def blob_stamp(self, sha256: str) -> Any:
        """The inner archive's stamp; ``("kept", sha256)`` while the write is in flight."""
        return ("kept", sha256) if self._kept(sha256) is not None else self.inner.blob_stamp(sha256)

    def __contains__(self, sha256: object) -> bool:
        return self._kept(sha256) is not None or sha256 in self.inner

    def get_record(self, sha256: str) -> bytes:
        return bytes(self.inner.get_record(sha256))

    # ------------------------------------------------------------------ the rest: the inner archive
    def iter_hashes(self) -> Iterator[str]:
        self.flush()
        return iter(self.inner.iter_hashes())

    def release(self, episode_id: str) -> None:
        self.inner.release(episode_id)

    def live_episodes(self) -> list[str]:
        return list(self.inner.live_episodes())

    def gc(self, *, grace_seconds: float = 3600.0, dry_run: bool = False) -> GCReport:
        self.flush()
        return self.inner.gc(grace_seconds=grace_seconds, dry_run=dry_run)  # type: ignore[no-any-return]
