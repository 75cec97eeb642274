"""RGB-similarity allocation: picks the visually closest events, always exact-B."""

from __future__ import annotations

import pytest

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import AllocationContext, exact_b_size, recent_b
from causalcache_memory.allocation.rgb import RGBSimilarityAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import AllocationError
from causalcache_memory.trace import Trace

CLICK = Action(type="click", x=0.5, y=0.5)


def _trace(archive, colors, current, make_png) -> Trace:
    trace = Trace("find the orders page", episode_id="rgb-test")
    trace.observe(archive.put(make_png((0, 0, 0), text="start")).sha256)
    for i, color in enumerate(colors):
        trace.record(CLICK, f"response {i + 1}", archive.put(make_png(color, text=str(i))).sha256)
    trace.observe(archive.put(make_png(current, text="now")).sha256)
    return trace


@pytest.fixture
def archive(tmp_path):
    return LocalArchive(tmp_path / "archive")


def test_picks_identical_screenshot(archive, make_png):
    colors = [(200, 0, 0), (0, 200, 0), (0, 0, 200), (90, 90, 90), (10, 10, 10), (250, 250, 0)]
    trace = _trace(archive, colors, (0, 0, 0), make_png)
    # the current screen is byte-identical to event 3's screenshot
    trace.observe(trace.event(3).screenshot)
    alloc = RGBSimilarityAllocator(size=8).allocate(AllocationContext(trace=trace, budget=1, archive=archive))
    assert alloc.selected == (3,)
    assert alloc.allocator == "rgb" and alloc.k == 1
    assert alloc.scores[3] == pytest.approx(0.0)
    assert all(score < 0 for j, score in alloc.scores.items() if j != 3)


def test_ranks_by_similarity(archive, make_png):
    colors = [(250, 0, 0), (120, 120, 120), (0, 0, 250), (130, 130, 130), (0, 250, 0)]
    trace = _trace(archive, colors, (125, 125, 125), make_png)
    alloc = RGBSimilarityAllocator(size=8).allocate(AllocationContext(trace=trace, budget=2, archive=archive))
    assert alloc.selected == (2, 4)


def test_ties_go_to_recent_events(archive, make_png):
    png = make_png((40, 40, 40))
    trace = Trace("goal", episode_id="ties")
    sha = archive.put(png).sha256
    for i in range(6):
        trace.record(CLICK, f"r{i}", sha)
    trace.observe(archive.put(make_png((90, 90, 90))).sha256)
    alloc = RGBSimilarityAllocator().allocate(AllocationContext(trace=trace, budget=2, archive=archive))
    assert alloc.selected == (5, 6) and alloc.is_recent


@pytest.mark.parametrize("budget", [0, 1, 2, 3, 5, 8])
def test_exact_b_for_every_t(archive, make_png, budget):
    allocator = RGBSimilarityAllocator(size=4)
    trace = Trace("goal", episode_id="exact-b")
    trace.observe(archive.put(make_png((0, 0, 0))).sha256)
    for t in range(1, 11):
        assert trace.t == t
        alloc = allocator.allocate(AllocationContext(trace=trace, budget=budget, archive=archive))
        assert len(alloc.selected) == exact_b_size(t, budget) == min(budget, t - 1)
        assert all(1 <= j < t for j in alloc.selected)
        assert alloc.k == len(set(alloc.selected) - set(recent_b(t, budget)))
        trace.record(CLICK, f"r{t}", archive.put(make_png(((37 * t) % 256, 0, 0))).sha256)


def test_needs_archive_and_current_screen(archive, make_png):
    trace = Trace("goal")
    trace.record(CLICK, "r", archive.put(make_png()).sha256)
    trace.record(CLICK, "r", archive.put(make_png((1, 1, 1))).sha256)
    with pytest.raises(AllocationError, match="archive is None"):
        RGBSimilarityAllocator().allocate(AllocationContext(trace=trace, budget=1))
    trace.current_screenshot = None
    with pytest.raises(AllocationError, match="current screenshot"):
        RGBSimilarityAllocator().allocate(AllocationContext(trace=trace, budget=1, archive=archive))


def test_missing_screenshot_is_a_clear_error(tmp_path, archive, make_png):
    other = LocalArchive(tmp_path / "other")
    trace = Trace("goal")
    trace.record(CLICK, "r", other.put(make_png((3, 3, 3))).sha256)  # stored elsewhere
    trace.record(CLICK, "r", archive.put(make_png((4, 4, 4))).sha256)
    with pytest.raises(AllocationError, match="event 1"):
        RGBSimilarityAllocator().allocate(AllocationContext(trace=trace, budget=1, archive=archive))


def test_bad_size():
    with pytest.raises(AllocationError, match="size=0"):
        RGBSimilarityAllocator(size=0)
