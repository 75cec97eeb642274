"""First-B and evenly spaced exact-B: |S| = min(B, t-1) at every t, distinct in-range events, registered."""

from __future__ import annotations

import itertools

import pytest

from causalcache_memory.allocation import EvenlySpacedAllocator, FirstBAllocator
from causalcache_memory.allocation.base import AllocationContext, recent_b
from causalcache_memory.allocation.positional import evenly_spaced, first_b
from causalcache_memory.allocation.registry import available_allocators, build_allocator
from causalcache_memory.trace import Trace


def _trace(n: int) -> Trace:
    trace = Trace("goal", episode_id="e", platform="mobile")
    from causalcache_memory.actions.model import Action

    trace.observe("0" * 64)
    for i in range(n):
        trace.record(Action("back"), "r", f"{i + 1:064d}", app="A")
    return trace


@pytest.mark.parametrize("rule", [first_b, evenly_spaced])
def test_exact_b_at_every_t_including_t_le_b(rule) -> None:
    for t in range(1, 30):
        for budget in range(0, 10):
            chosen = rule(t, budget)
            n = min(budget, t - 1)
            assert len(chosen) == n, (t, budget, chosen)
            assert len(set(chosen)) == n and list(chosen) == sorted(chosen)
            assert all(1 <= j <= t - 1 for j in chosen), (t, budget, chosen)
            if t - 1 <= budget:  # the whole history fits: every exact-B rule equals Recent-B
                assert chosen == recent_b(t, budget)


def test_first_b_is_the_earliest_and_evenly_spaced_spreads_to_the_latest() -> None:
    assert first_b(20, 4) == (1, 2, 3, 4)
    spaced = evenly_spaced(20, 4)
    assert spaced[-1] == 19 and spaced[0] > 1
    gaps = [b - a for a, b in itertools.pairwise(spaced)]
    assert max(gaps) - min(gaps) <= 1  # regular strides
    assert spaced != recent_b(20, 4) and spaced != first_b(20, 4)


@pytest.mark.parametrize(
    ("name", "cls"), [("first", FirstBAllocator), ("evenly_spaced", EvenlySpacedAllocator)]
)
def test_registered_and_allocate_through_the_contract(name, cls) -> None:
    assert name in available_allocators()
    allocator = build_allocator(name)
    assert isinstance(allocator, cls) and allocator.name == name
    for n in (0, 2, 4, 11):
        trace = _trace(n)
        ctx = AllocationContext(trace=trace, budget=4)
        allocation = allocator.allocate(ctx)
        assert len(allocation.selected) == min(4, ctx.t - 1)
        assert allocation.allocator == name
