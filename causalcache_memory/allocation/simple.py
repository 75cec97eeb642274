"""Baseline allocators: Recent-B, Recent-B with batch eviction, summary-only (B = 0), seeded Random exact-B."""

from __future__ import annotations

import hashlib
import random

from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    exact_b_size,
    make_allocation,
    recent_b,
)
from causalcache_memory.errors import AllocationError

__all__ = ["RandomAllocator", "RecentAllocator", "RecentBatchAllocator", "SummaryOnlyAllocator"]


class RecentAllocator:
    """Recent-B: the ``min(B, t-1)`` most recent events. What every agent does today."""

    name = "recent"
    uses_witness = False

    def allocate(self, ctx: AllocationContext) -> Allocation:
        return make_allocation(recent_b(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator=self.name)


class RecentBatchAllocator:
    """Recent-B with batch eviction: the window moves ``chunk`` events at a time (a cache-keeping baseline).

    Anthropic's computer-use reference loop drops old screenshots in chunks, only past its limit, so the
    prompt prefix stays put between chunks. Under exact-B (``|S| = min(B, t-1)``) the analogue is a window
    that holds still between chunks: while the history is shorter than ``B`` it is every event (each step
    appends one); after that ``S`` is the ``B`` events ending at the newest multiple of ``chunk`` past
    ``B``, so the newest ``0 .. chunk-1`` events are shown as summaries only. (The reference loop instead
    keeps up to ``B + chunk - 1`` screenshots; exact-B keeps the image count fixed.) ``chunk = 1`` is
    Recent-B.
    """

    name = "recent_batch"
    uses_witness = False

    def __init__(self, chunk: int = 2) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise AllocationError(f"chunk={chunk!r} must be an integer >= 1 (1 = Recent-B); set batch_chunk")
        self.chunk = chunk

    def allocate(self, ctx: AllocationContext) -> Allocation:
        n, size = ctx.t - 1, exact_b_size(ctx.t, ctx.budget)
        end = n if n <= size else n - (n - size) % self.chunk
        return make_allocation(
            range(end - size + 1, end + 1), t=ctx.t, budget=ctx.budget, allocator=self.name
        )


class SummaryOnlyAllocator:
    """Summary-only memory: no history screenshot (effective ``B = 0``) whatever budget is configured."""

    name = "summary_only"
    uses_witness = False

    def allocate(self, ctx: AllocationContext) -> Allocation:
        return make_allocation((), t=ctx.t, budget=0, allocator=self.name)


class RandomAllocator:
    """Random exact-B: a uniformly random ``min(B, t-1)``-subset of the history.

    Reproducible: the draw depends only on ``(seed, episode_seed, episode_id, t, B)``, so re-running an
    episode (or resuming it from a checkpoint) gives the same allocations.
    """

    name = "random"
    uses_witness = False

    def __init__(self, seed: int = 0) -> None:
        self.seed = int(seed)

    def allocate(self, ctx: AllocationContext) -> Allocation:
        size = exact_b_size(ctx.t, ctx.budget)
        key = f"{self.seed}:{ctx.episode_seed}:{ctx.trace.episode_id}:{ctx.t}:{ctx.budget}".encode()
        rng = random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))
        chosen = rng.sample(range(1, ctx.t), size) if size else []
        return make_allocation(chosen, t=ctx.t, budget=ctx.budget, allocator=self.name)
