"""Each retained screenshot is encoded for the wire once per blob; a changed file is read and verified again."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import PromptImageError
from causalcache_memory.render import render_prompt
from causalcache_memory.render.messages import WIRE_CACHE, WireCache
from causalcache_memory.trace import Trace


class CountingArchive(LocalArchive):
    reads = 0

    def get_bytes(self, sha256: str) -> bytes:
        type(self).reads += 1
        return super().get_bytes(sha256)


class NoStampArchive(CountingArchive):
    blob_stamp = None  # type: ignore[assignment]


def _bound(archive, make_png, n: int = 3):
    trace = Trace("g", episode_id="e")
    trace.observe(archive.put(make_png(color=(0, 0, 0))).sha256)
    for i in range(1, n + 1):
        trace.record(Action("click", x=0.5, y=0.5), "r", archive.put(make_png(color=(i, 2, 3))).sha256)
    allocation = RecentAllocator().allocate(AllocationContext(trace, 2, archive))
    return lambda: render_prompt(trace, allocation).bind(archive)


@pytest.fixture(autouse=True)
def _empty_cache():
    WIRE_CACHE.clear()
    yield
    WIRE_CACHE.clear()


def test_a_screenshot_is_read_and_encoded_once_across_calls(tmp_path, make_png) -> None:
    archive = CountingArchive(tmp_path)
    CountingArchive.reads = 0
    bind = _bound(archive, make_png)
    first = [bind().data_url(i) for i in range(3)]
    again = [bind().data_url(i) for i in range(3)]
    distinct = {ref.sha256 for ref in bind().images}  # the newest event's screen is also the current one
    assert first == again and CountingArchive.reads == len(distinct) == 2
    raw = archive.get_bytes(bind().images[0].sha256)
    assert first[0] == "data:image/png;base64," + base64.b64encode(raw).decode()


def test_an_archive_without_stamps_is_read_every_time(tmp_path, make_png) -> None:
    archive = NoStampArchive(tmp_path)
    NoStampArchive.reads = 0
    bind = _bound(archive, make_png)
    for _ in range(2):
        [bind().data_url(i) for i in range(3)]
    assert NoStampArchive.reads == 6 and len(WIRE_CACHE) == 0  # 3 images a call, read every time


def test_a_blob_damaged_after_it_was_cached_still_fails_the_prompt(tmp_path, make_png) -> None:
    archive = LocalArchive(tmp_path)
    bind = _bound(archive, make_png)
    bind().data_url(0)
    sha = bind().images[0].sha256
    blob = next(p for p in Path(tmp_path).rglob(sha) if p.is_file())
    data = bytearray(blob.read_bytes())
    data[-20] ^= 0xFF
    blob.write_bytes(bytes(data))
    with pytest.raises(PromptImageError, match=sha):
        bind().data_url(0)


def test_the_cache_keeps_at_most_max_chars_dropping_the_oldest() -> None:
    cache = WireCache(max_chars=10)
    cache.put("a", "12345")
    cache.put("b", "12345")
    assert cache.get("a") == "12345"  # now the newest
    cache.put("c", "123")
    assert cache.get("b") is None and cache.get("a") == "12345" and cache.get("c") == "123"
    cache.put("huge", "x" * 11)  # larger than the whole cache: not kept
    assert cache.get("huge") is None and len(cache) == 2
    cache.restamp("", "s", "old", "new")  # nothing under that key: no change
    assert len(cache) == 2
