"""Small RGB thumbnails of archived screenshots, cached per content hash.

A thumbnail is the screenshot converted to RGB and area-averaged (box filter) down to
``size x size``: a float32 array of shape ``(size, size, 3)`` with values in ``[0, 1]``. Blobs are
immutable (content-addressed), so a cached thumbnail never goes stale. Used by the RGB-similarity
allocation policy and by the learned selector's cheap image statistics.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

import numpy as np

from ._keys import check_hash

if TYPE_CHECKING:
    from .base import ScreenshotArchive

__all__ = ["ThumbnailCache", "thumbnail"]


def thumbnail(image: object, size: int) -> np.ndarray:
    """Area-averaged ``(size, size, 3)`` float32 RGB array in ``[0, 1]`` of a PIL image."""
    from PIL import Image

    if not isinstance(image, Image.Image):
        raise TypeError(f"image must be a PIL.Image.Image, got {type(image).__name__}")
    rgb = image.convert("RGB")
    if hasattr(rgb, "reduce") and min(rgb.size) >= 4 * size:
        # cheap integer pre-reduction (itself an area average) before the exact box resize
        factor = max(1, min(rgb.size) // (2 * size))
        rgb = rgb.reduce(factor)
    small = rgb.resize((size, size), Image.Resampling.BOX)
    arr = np.asarray(small, dtype=np.float32) / np.float32(255.0)
    arr.setflags(write=False)
    return arr


class ThumbnailCache:
    """Thread-safe LRU cache of thumbnails of one archive's blobs.

    Args:
        archive: the screenshot archive thumbnails are read from (integrity-checked reads).
        size: thumbnail side in pixels.
        capacity: how many thumbnails to keep (``capacity * size * size * 12`` bytes: 48 MiB at the
            defaults).

    Returned arrays are read-only and shared; copy before modifying.
    """

    def __init__(self, archive: ScreenshotArchive, size: int = 32, capacity: int = 4096) -> None:
        if isinstance(size, bool) or not isinstance(size, int) or size < 1:
            raise ValueError(f"size={size!r} must be a positive integer (thumbnail side in pixels)")
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"capacity={capacity!r} must be a positive integer (number of thumbnails)")
        self.archive = archive
        self.size = size
        self.capacity = capacity
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._lru)

    def __contains__(self, sha256: object) -> bool:
        with self._lock:
            return sha256 in self._lru

    def get(self, sha256: str) -> np.ndarray:
        """Thumbnail of blob ``sha256``: ``(size, size, 3)`` float32 in ``[0, 1]``.

        Raises the archive's ``BlobNotFoundError``/``BlobCorruptError``/``ImageRejectedError``.
        """
        check_hash(sha256)
        with self._lock:
            arr = self._lru.get(sha256)
            if arr is not None:
                self._lru.move_to_end(sha256)
                self.hits += 1
                return arr
            self.misses += 1
        # decode outside the lock; two threads may compute the same thumbnail, both results are equal
        with self.archive.open_image(sha256) as image:
            arr = thumbnail(image, self.size)
        with self._lock:
            self._lru[sha256] = arr
            self._lru.move_to_end(sha256)
            while len(self._lru) > self.capacity:
                self._lru.popitem(last=False)
        return arr

    def clear(self) -> None:
        with self._lock:
            self._lru.clear()
