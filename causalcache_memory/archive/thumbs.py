"""Small RGB thumbnails of archived screenshots, cached per content hash, optionally prefetched.

A thumbnail is the screenshot converted to RGB and area-averaged (box filter) down to
``size x size``: a float32 array of shape ``(size, size, 3)`` with values in ``[0, 1]``. Blobs are
immutable (content-addressed), so a cached thumbnail never goes stale. Used by the RGB-similarity
allocator and by the learned selector's cheap image statistics.

Cost: for a 1920x1080 PNG almost all of the time is the PNG decode itself (zlib inflate plus row
unfiltering, about 20-30 ms on one core); the reduction to ``size x size`` costs about 1-2 ms. PNG has no
reduced-resolution decode (``Image.draft`` only helps JPEG), so the way to keep that decode off an agent
step's critical path is :meth:`ThumbnailCache.prefetch`: start it on a background thread as soon as the
screenshot is archived, while the policy model runs, and let :meth:`ThumbnailCache.get` wait for it.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from causalcache_memory.archive._keys import check_hash

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["ThumbnailCache", "thumbnail"]


def thumbnail(image: object, size: int) -> np.ndarray:
    """Area-averaged ``(size, size, 3)`` float32 RGB array in ``[0, 1]`` of a PIL image.

    An integer ``reduce`` (itself an area average) first brings large images to between ``2 * size`` and
    ``4 * size`` pixels on the short side, then an exact BOX resize gives ``size x size``. An image that is
    already RGB is not copied by a conversion (same pixels, about 5 ms saved on a 1080p screenshot).
    """
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL.Image.Image, got {type(image).__name__}")
    rgb = image if image.mode == "RGB" else image.convert("RGB")
    if hasattr(rgb, "reduce") and min(rgb.size) >= 4 * size:
        # cheap integer pre-reduction (itself an area average) before the exact box resize
        factor = max(1, min(rgb.size) // (2 * size))
        rgb = rgb.reduce(factor)
    small = rgb.resize((size, size), Image.Resampling.BOX)
    arr = np.asarray(small, dtype=np.float32) / np.float32(255.0)
    arr.setflags(write=False)
    return arr


class ThumbnailCache:
    """Thread-safe LRU cache of thumbnails of one archive's blobs, with background prefetch.

    Args:
        archive: the screenshot archive thumbnails are read from (integrity-checked reads).
        size: thumbnail side in pixels.
        capacity: how many thumbnails to keep (``capacity * size * size * 12`` bytes: 48 MiB at the
            defaults).
        workers: threads of the prefetch pool (created on the first :meth:`prefetch`).

    Each thumbnail is computed at most once at a time: a :meth:`get` of a hash whose computation is in
    flight (prefetched, or requested by another thread) waits for it instead of decoding again.
    Returned arrays are read-only and shared; copy before modifying.
    """

    def __init__(
        self, archive: ScreenshotArchive, size: int = 32, capacity: int = 4096, *, workers: int = 1
    ) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size={size!r} must be a positive integer (thumbnail side in pixels)")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity={capacity!r} must be a positive integer (number of thumbnails)")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"workers={workers!r} must be a positive integer (prefetch threads)")
        self.archive = archive
        self.size = size
        self.capacity = capacity
        self.workers = workers
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._inflight: dict[str, concurrent.futures.Future[np.ndarray]] = {}
        self._lock = threading.Lock()
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self.hits = 0
        self.misses = 0
        #: thumbnails actually decoded (cache misses that were not already in flight)
        self.computed = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._lru)

    def __contains__(self, sha256: object) -> bool:
        with self._lock:
            return sha256 in self._lru

    def _lookup(self, sha256: str) -> tuple[np.ndarray | None, concurrent.futures.Future[np.ndarray], bool]:
        """Under the lock: ``(cached, future, owner)``; ``owner`` means the caller must compute it."""
        arr = self._lru.get(sha256)
        if arr is not None:
            self._lru.move_to_end(sha256)
            return arr, None, False  # type: ignore[return-value]
        future = self._inflight.get(sha256)
        if future is not None:
            return None, future, False
        future = concurrent.futures.Future()
        self._inflight[sha256] = future
        self.computed += 1
        return None, future, True

    def _compute(self, sha256: str, future: concurrent.futures.Future[np.ndarray]) -> None:
        """Decode ``sha256`` and resolve ``future`` (with the exception, if any); cache the result."""
        try:
            with self.archive.open_image(sha256) as image:
                arr = thumbnail(image, self.size)
        except BaseException as exc:
            with self._lock:
                self._inflight.pop(sha256, None)
            future.set_exception(exc)
            return
        with self._lock:
            self._lru[sha256] = arr
            self._lru.move_to_end(sha256)
            while len(self._lru) > self.capacity:
                self._lru.popitem(last=False)
            self._inflight.pop(sha256, None)
        future.set_result(arr)

    def get(self, sha256: str) -> np.ndarray:
        """Thumbnail of blob ``sha256``: ``(size, size, 3)`` float32 in ``[0, 1]``.

        Waits for an in-flight computation of the same hash rather than duplicating it. Raises the
        archive's ``BlobNotFoundError``/``BlobCorruptError``/``ImageRejectedError``.
        """
        check_hash(sha256)
        with self._lock:
            arr, future, owner = self._lookup(sha256)
            if arr is not None:
                self.hits += 1
                return arr
            self.misses += 1
        if owner:
            self._compute(sha256, future)
        return future.result()

    def prefetch(self, sha256: str) -> concurrent.futures.Future[np.ndarray]:
        """Start computing ``sha256``'s thumbnail on the prefetch pool; returns its future.

        Returns at once (a done future when it is cached, the running one when it is in flight). Errors
        are not raised here: they resolve the future, and a later :meth:`get` raises them again.
        """
        check_hash(sha256)
        with self._lock:
            arr, future, owner = self._lookup(sha256)
            if arr is not None:
                done: concurrent.futures.Future[np.ndarray] = concurrent.futures.Future()
                done.set_result(arr)
                return done
            if owner:
                if self._pool is None:
                    self._pool = concurrent.futures.ThreadPoolExecutor(
                        self.workers, thread_name_prefix="causalcache-thumbs"
                    )
                pool = self._pool
        if owner:
            try:
                pool.submit(self._compute, sha256, future)
            except RuntimeError as exc:  # pool shut down by close(): leave it to a later get()
                with self._lock:
                    self._inflight.pop(sha256, None)
                future.set_exception(exc)
        return future

    def clear(self) -> None:
        """Drop every cached thumbnail (computations in flight still complete)."""
        with self._lock:
            self._lru.clear()

    def close(self) -> None:
        """Stop the prefetch pool (waits for running decodes); the cache stays usable for :meth:`get`."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
