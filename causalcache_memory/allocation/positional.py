"""Positional exact-B baselines: the B earliest events (First-B) and B evenly spaced events.

They read nothing but the decision index ``t`` and the budget, so any gain they show over Recent-B is a
gain *by position alone*. A world (or benchmark) in which "restore the oldest steps" wins is rewarding
position, not memory; these two allocators make that visible in the ladder and the closed loop.

Both return exactly ``min(B, t-1)`` events at every ``t`` (so at ``t <= B + 1`` they equal Recent-B: the
whole history).
"""

from __future__ import annotations

from causalcache_memory.allocation.base import Allocation, AllocationContext, exact_b_size, make_allocation

__all__ = ["EvenlySpacedAllocator", "FirstBAllocator", "evenly_spaced", "first_b"]


def first_b(t: int, budget: int) -> tuple[int, ...]:
    """The ``min(B, t-1)`` earliest event indices ``1..n``."""
    return tuple(range(1, exact_b_size(t, budget) + 1))


def evenly_spaced(t: int, budget: int) -> tuple[int, ...]:
    """``min(B, t-1)`` distinct indices spread evenly over ``1..t-1``, always including the latest event.

    Index ``i`` of ``n`` is ``round((i + 1) * (t - 1) / n)`` for ``i = 0..n-1``: strides of ``(t-1)/n``
    ending at ``t - 1``. For ``n = t - 1`` this is the whole history.
    """
    n = exact_b_size(t, budget)
    if n == 0:
        return ()
    h = t - 1
    picks = [max(1, min(h, int((i + 1) * h / n + 0.5))) for i in range(n)]
    # strides are >= 1 when n <= h, so rounding can only collide at the ends; repair to keep |S| = n
    out: list[int] = []
    for p in picks:
        p = max(p, out[-1] + 1) if out else p
        out.append(p)
    shift = out[-1] - h
    if shift > 0:
        out = [p - shift for p in out]
    return tuple(out)


class FirstBAllocator:
    """First-B: the B earliest events of the episode (registered as ``first``)."""

    name = "first"
    uses_witness = False

    def allocate(self, ctx: AllocationContext) -> Allocation:
        return make_allocation(first_b(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator=self.name)


class EvenlySpacedAllocator:
    """Evenly spaced exact-B: B events at regular strides over the history (registered as ``evenly_spaced``)."""

    name = "evenly_spaced"
    uses_witness = False

    def allocate(self, ctx: AllocationContext) -> Allocation:
        return make_allocation(
            evenly_spaced(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator=self.name
        )
