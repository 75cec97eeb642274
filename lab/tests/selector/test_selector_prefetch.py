"""The learned selector's ``prepare`` hook prefetches thumbnails that allocation then reuses."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from causalcache_memory.archive import LocalArchive, ThumbnailCache


def _png(seed: int) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 256, size=(180, 320, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def learned(trained):
    # a scorer trained *with* thumbnail features (the bundled one uses none: see the test below)
    from causalcache_memory.selector.allocator import SelectorAllocator

    selector = SelectorAllocator(trained[1], threads=1)
    assert selector.model.image_features
    yield selector
    selector.close()


def test_the_bundled_selector_reads_no_pixels(tmp_path):
    """The bundled scorer was trained without thumbnail features (chosen by the numbers in RESULTS.md):
    it neither prefetches nor decodes screenshots. onnxruntime is a core dependency and the bundled
    model is package data: a missing one is a regression this test reports, not a skip."""
    from causalcache_memory import Action, Trace
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.selector.allocator import SelectorAllocator

    selector = SelectorAllocator(threads=1)
    assert selector.model.image_features is False

    class CountingArchive(LocalArchive):
        opened = 0

        def open_image(self, sha256):
            CountingArchive.opened += 1
            return super().open_image(sha256)

    archive = CountingArchive(tmp_path / "a")
    trace = Trace("goal", episode_id="ep")
    trace.observe(archive.put(_png(0)).sha256)
    for i in range(1, 8):
        sha = archive.put(_png(i)).sha256
        selector.prepare(archive, sha)
        trace.record(Action("click", x=0.1 * i, y=0.2), "click", sha, app="Mail")
    allocation = selector.allocate(
        AllocationContext(trace, 2, archive, witness=Action("click", x=0.5, y=0.5))
    )
    assert len(allocation.selected) == 2 and CountingArchive.opened == 0
    selector.close()


def test_prepare_prefetches_the_thumbnail(learned, tmp_path):
    archive = LocalArchive(tmp_path / "a")
    sha = archive.put(_png(1)).sha256
    learned.prepare(archive, sha)
    thumbs = learned._extractor.thumbnails
    assert isinstance(thumbs, ThumbnailCache) and thumbs.archive is archive
    got = thumbs.get(sha)  # waits for the prefetch if it is still running
    assert thumbs.computed == 1
    np.testing.assert_array_equal(got, ThumbnailCache(archive, size=learned.thumbnail_size).get(sha))


def test_prepare_then_allocate_reuses_the_cache(learned, tmp_path):
    from causalcache_memory import Action, Trace
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.controller import MemoryController

    archive = LocalArchive(tmp_path / "a")

    class Instant:
        name = "instant"

        def generate(self, prompt):
            from causalcache_memory import Generation

            return Generation("click", Action("click", x=0.5, y=0.5))

        def score(self, prompts, targets):  # pragma: no cover - not used
            return [0.0] * len(prompts)

    ctl = MemoryController(policy=Instant(), archive=archive, allocator=learned, budget=2)
    trace = Trace("goal", episode_id="ep")
    ctl.observe(trace, _png(0))
    for i in range(1, 6):
        ctl.record(trace, Action("click", x=0.1 * i, y=0.2), _png(i))
    ctl.close()
    thumbs = learned._extractor.thumbnails
    assert thumbs.computed == 6  # every archived screenshot was prefetched once
    allocation = learned.allocate(AllocationContext(trace, 2, archive, witness=Action("click", x=0.5, y=0.5)))
    assert len(allocation.selected) == 2
    assert thumbs.computed == 6  # allocation decoded nothing new
