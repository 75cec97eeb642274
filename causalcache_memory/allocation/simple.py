"""Baseline allocators: Recent-B, summary-only (B = 0) and seeded Random exact-B."""

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

__all__ = ["RandomAllocator", "RecentAllocator", "SummaryOnlyAllocator"]


class RecentAllocator:
    """Recent-B: the ``min(B, t-1)`` most recent events. What every agent does today."""

    name = "recent"
    uses_witness = False

    def allocate(self, ctx: AllocationContext) -> Allocation:
        return make_allocation(recent_b(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator=self.name)


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
