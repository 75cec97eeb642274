"""Thumbnail cache: area-averaged float32 RGB, LRU eviction, thread safety, integrity errors."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from archive_helpers import corrupt
from PIL import Image

from causalcache_memory.archive import ThumbnailCache
from causalcache_memory.errors import BlobCorruptError


def _png(image: Image.Image) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def test_thumbnail_is_area_average(archive):
    # left half black, right half white: a 2x2 thumbnail is exact, 1x1 is the mean 0.5
    image = Image.new("RGB", (64, 32), (0, 0, 0))
    image.paste((255, 255, 255), (32, 0, 64, 32))
    sha = archive.put(_png(image)).sha256
    thumb = ThumbnailCache(archive, size=2).get(sha)
    assert thumb.shape == (2, 2, 3) and thumb.dtype == np.float32
    np.testing.assert_allclose(thumb[:, 0], 0.0)
    np.testing.assert_allclose(thumb[:, 1], 1.0)
    mean = ThumbnailCache(archive, size=1).get(sha)
    np.testing.assert_allclose(mean, 0.5, atol=1 / 255)


def test_large_screenshot_downsampled_exactly(archive):
    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(256, 512, 3), dtype=np.uint8)
    sha = archive.put(_png(Image.fromarray(pixels))).sha256
    thumb = ThumbnailCache(archive, size=16).get(sha)
    assert thumb.shape == (16, 16, 3)
    # mean colour is preserved by area averaging
    np.testing.assert_allclose(thumb.mean(), pixels.mean() / 255.0, atol=2e-3)
    assert not thumb.flags.writeable


def test_lru_eviction_and_hits(archive, make_png):
    cache = ThumbnailCache(archive, size=4, capacity=2)
    a, b, c = (archive.put(make_png((i, 0, 0))).sha256 for i in (1, 2, 3))
    cache.get(a)
    cache.get(b)
    cache.get(a)  # a most recently used
    cache.get(c)  # evicts b
    assert a in cache and c in cache and b not in cache
    assert (cache.hits, cache.misses, len(cache)) == (1, 3, 2)


def test_thread_safe(archive, make_png):
    hashes = [archive.put(make_png((i, i, i))).sha256 for i in range(12)]
    cache = ThumbnailCache(archive, size=8, capacity=5)
    with ThreadPoolExecutor(max_workers=6) as pool:
        arrays = list(pool.map(cache.get, hashes * 4))
    for sha, arr in zip(hashes * 4, arrays, strict=True):
        expected = hashes.index(sha) / 255.0
        np.testing.assert_allclose(arr, expected, atol=1e-6)
    assert len(cache) == 5


def test_corrupt_blob_raises(archive, make_png):
    sha = archive.put(make_png((4, 5, 6))).sha256
    corrupt(archive, sha)
    with pytest.raises(BlobCorruptError):
        ThumbnailCache(archive).get(sha)


def test_bad_arguments(archive):
    with pytest.raises(ValueError, match="size"):
        ThumbnailCache(archive, size=0)
    with pytest.raises(ValueError, match="capacity"):
        ThumbnailCache(archive, capacity=0)
