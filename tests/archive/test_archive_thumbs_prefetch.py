"""Thumbnail prefetch: same arrays as a cold get, one computation per hash, errors surface on get."""

from __future__ import annotations

import io
import threading

import numpy as np
import pytest
from archive_helpers import corrupt
from PIL import Image

from causalcache_memory.archive import ThumbnailCache
from causalcache_memory.archive.thumbs import thumbnail
from causalcache_memory.errors import BlobCorruptError


def _png(pixels: np.ndarray, mode: str | None = None) -> bytes:
    image = Image.fromarray(pixels)
    if mode is not None:
        image = image.convert(mode)
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def _pixels(seed: int, shape=(270, 480, 3)) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=shape, dtype=np.uint8)


def test_prefetch_then_get_equals_cold_get(archive):
    sha = archive.put(_png(_pixels(1))).sha256
    cold = ThumbnailCache(archive, size=32).get(sha)
    warm = ThumbnailCache(archive, size=32)
    future = warm.prefetch(sha)
    got = warm.get(sha)
    assert future.result() is got
    np.testing.assert_array_equal(got, cold)
    assert warm.computed == 1 and sha in warm
    assert warm.prefetch(sha).result() is got  # cached: a done future, nothing recomputed
    assert warm.computed == 1
    warm.close()


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P"])
def test_rgb_fast_path_matches_explicit_conversion(archive, mode):
    data = _png(_pixels(2), mode)
    sha = archive.put(data).sha256
    got = ThumbnailCache(archive, size=16).get(sha)
    with Image.open(io.BytesIO(data)) as image:
        reference = Image.fromarray(np.asarray(image.convert("RGB")).copy())
    np.testing.assert_array_equal(got, thumbnail(reference, 16))


class _SlowArchive:
    """Wraps an archive; ``open_image`` blocks until released and counts its calls."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.calls = 0
        self.started = threading.Event()
        self.release = threading.Event()

    def open_image(self, sha256: str):
        self.calls += 1
        self.started.set()
        assert self.release.wait(10.0)
        return self.inner.open_image(sha256)


def test_concurrent_get_during_prefetch_computes_once(archive):
    sha = archive.put(_png(_pixels(3))).sha256
    slow = _SlowArchive(archive)
    cache = ThumbnailCache(slow, size=8)  # type: ignore[arg-type]
    future = cache.prefetch(sha)
    assert slow.started.wait(10.0)
    results: list[np.ndarray] = []
    waiters = [threading.Thread(target=lambda: results.append(cache.get(sha))) for _ in range(3)]
    for w in waiters:
        w.start()
    assert not future.done()
    slow.release.set()
    for w in waiters:
        w.join(10.0)
    assert len(results) == 3 and all(r is future.result() for r in results)
    assert slow.calls == 1 and cache.computed == 1
    cache.close()


def test_prefetch_error_is_raised_by_get_and_not_cached(archive):
    sha = archive.put(_png(_pixels(4))).sha256
    corrupt(archive, sha)
    cache = ThumbnailCache(archive, size=8)
    future = cache.prefetch(sha)
    assert isinstance(future.exception(10.0), BlobCorruptError)
    assert sha not in cache
    with pytest.raises(BlobCorruptError):
        cache.get(sha)
    cache.close()


def test_prefetch_after_close_falls_back_to_get(archive):
    sha = archive.put(_png(_pixels(5))).sha256
    cache = ThumbnailCache(archive, size=8)
    cache.prefetch(sha).result(10.0)
    cache.close()
    other = archive.put(_png(_pixels(6))).sha256
    cache.prefetch(other).result(10.0)  # a fresh pool is made on demand
    assert other in cache
    cache.close()
    with pytest.raises(ValueError, match="workers"):
        ThumbnailCache(archive, workers=0)
