"""RGB-similarity allocation: promote the events whose screenshot looks most like the current screen.

Score of event ``j`` at decision ``t`` (thumbnails ``T`` of shape ``(s, s, 3)`` in ``[0, 1]``):

    score_j = -mean(|T(v_j) - T(x_t)|)

``S`` is the ``min(B, t-1)`` highest-scoring events; ties go to the more recent event. A visual-similarity
baseline in the paper's comparison of allocation signals; it reads pixels, so it needs the archive.
"""

from __future__ import annotations

import threading

import numpy as np

from causalcache_memory.allocation.base import Allocation, AllocationContext, exact_b_size, make_allocation
from causalcache_memory.archive.thumbs import ThumbnailCache
from causalcache_memory.errors import AllocationError, ArchiveError

__all__ = ["RGBSimilarityAllocator"]


class RGBSimilarityAllocator:
    """Exact-B set of the events visually closest to the current screenshot.

    Args:
        size: thumbnail side used for the comparison (area-averaged down-sampling).
        capacity: thumbnails cached per archive (content-addressed, never stale).
    """

    name = "rgb"
    uses_witness = False

    def __init__(self, size: int = 32, capacity: int = 4096) -> None:
        for field, value in (("size", size), ("capacity", capacity)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AllocationError(f"rgb: {field}={value!r} must be a positive integer")
        self.size = size
        self.capacity = capacity
        self._cache: ThumbnailCache | None = None
        self._lock = threading.Lock()

    def _thumbs(self, ctx: AllocationContext) -> ThumbnailCache:
        if ctx.archive is None:
            raise AllocationError(
                "rgb: AllocationContext.archive is None; the RGB similarity allocator reads archived "
                "screenshots, pass the episode's ScreenshotArchive in the context"
            )
        with self._lock:
            if self._cache is None or self._cache.archive is not ctx.archive:
                self._cache = ThumbnailCache(ctx.archive, size=self.size, capacity=self.capacity)
            return self._cache

    def _thumb(self, cache: ThumbnailCache, sha256: str, what: str) -> np.ndarray:
        try:
            return cache.get(sha256)
        except ArchiveError as exc:
            raise AllocationError(f"rgb: cannot read the screenshot of {what} ({sha256}): {exc}") from exc

    def allocate(self, ctx: AllocationContext) -> Allocation:
        t, budget = ctx.t, ctx.budget
        size = exact_b_size(t, budget)
        cache = self._thumbs(ctx)
        if size == t - 1:  # every event fits: nothing to rank
            return make_allocation(range(1, t), t=t, budget=budget, allocator=self.name)
        current = ctx.trace.current_screenshot
        if current is None:
            raise AllocationError(
                "rgb: the trace has no current screenshot; call trace.observe(hash) before allocating"
            )
        target = self._thumb(cache, current, "the current screen")
        scores: dict[int, float] = {}
        for event in ctx.trace.events[: t - 1]:
            thumb = self._thumb(cache, event.screenshot, f"event {event.index}")
            scores[event.index] = -float(np.mean(np.abs(thumb - target)))
        ranked = sorted(scores, key=lambda j: (scores[j], j), reverse=True)
        return make_allocation(ranked[:size], t=t, budget=budget, allocator=self.name, scores=scores)
