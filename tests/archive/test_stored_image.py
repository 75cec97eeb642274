"""``put`` returns the hash with what the header check read, on every backend; the controller uses it."""

from __future__ import annotations

import hashlib
import io

import pytest
from PIL import Image

from causalcache_memory.archive import LocalArchive, StoredImage
from causalcache_memory.archive.cached import CachedArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.trace import Trace


def _jpeg(size: tuple[int, int]) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (9, 8, 7)).save(buf, format="JPEG")
    return buf.getvalue()


def test_put_returns_hash_format_size_and_length(archive, make_png) -> None:
    png = make_png(size=(64, 48))
    stored = archive.put(png)
    assert stored == StoredImage(hashlib.sha256(png).hexdigest(), "PNG", 64, 48, len(png))
    assert stored.size == (64, 48) and archive.put(png) == stored  # stored once, same answer
    jpeg = _jpeg((30, 20))
    assert archive.put(jpeg).size == (30, 20) and archive.put(jpeg).format == "JPEG"


def test_the_write_through_cache_returns_what_the_shared_archive_returned(tmp_path, make_png) -> None:
    png = make_png(size=(40, 30))
    inner = LocalArchive(tmp_path / "shared")
    cached = CachedArchive(inner, tmp_path / "cache")
    assert (
        cached.put(png)
        == inner.put(png)
        == StoredImage(hashlib.sha256(png).hexdigest(), "PNG", 40, 30, len(png))
    )


class NoReopenArchive(LocalArchive):
    """Counts header re-reads: the controller must record sizes from ``put``'s answer."""

    opened = 0

    def open_image(self, sha256: str):  # type: ignore[no-untyped-def]
        type(self).opened += 1
        return super().open_image(sha256)


@pytest.mark.parametrize("given", ["bytes", "stored"])
def test_observe_and_record_take_the_size_from_put_without_reopening(tmp_path, make_png, given) -> None:
    archive = NoReopenArchive(tmp_path)
    NoReopenArchive.opened = 0
    ctl = MemoryController(policy=None, archive=archive, allocator=_NoAllocator(), budget=1)  # type: ignore[arg-type]
    trace = Trace("g", episode_id="e")
    first, second = make_png(size=(64, 48)), make_png(color=(1, 1, 1), size=(32, 16))
    if given == "stored":
        first, second = ctl.put(first), ctl.put(second)  # type: ignore[assignment]
    ctl.observe(trace, first)
    ctl.record(trace, None, second, response="r")
    assert trace.event(1).metadata["unparsed"] and trace.current_screen_size == (32, 16)
    assert NoReopenArchive.opened == 0


class _NoAllocator:
    name = "none"
    uses_witness = False
