"""Exact-B contract and k for every allocator at every t, including t <= B."""

from __future__ import annotations

import hashlib

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.allocation import (
    AllocationContext,
    RandomAllocator,
    RecentAllocator,
    SummaryOnlyAllocator,
    make_allocation,
    recent_b,
)
from causalcache_memory.allocation.registry import (
    available_allocators,
    build_allocator,
    register_allocator,
)
from causalcache_memory.errors import AllocationError


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def trace_with(n: int, episode: str = "ep") -> Trace:
    trace = Trace("goal", episode_id=episode)
    trace.observe(sha("x1"))
    for i in range(n):
        trace.record(Action("click", x=0.5, y=0.5), "r", sha(f"{episode}{i}"))
    return trace


@pytest.mark.parametrize("budget", [0, 1, 2, 4, 8])
@pytest.mark.parametrize("n_events", [0, 1, 2, 3, 4, 5, 9, 20])
@pytest.mark.parametrize("allocator", [RecentAllocator(), RandomAllocator(seed=3)])
def test_exact_b_for_every_t(allocator, budget: int, n_events: int) -> None:
    trace = trace_with(n_events)
    alloc = allocator.allocate(AllocationContext(trace, budget))
    assert len(alloc.selected) == min(budget, trace.t - 1)
    assert len(set(alloc.selected)) == len(alloc.selected)
    assert all(1 <= j <= trace.t - 1 for j in alloc.selected)
    assert alloc.k == len(set(alloc.selected) - set(recent_b(trace.t, budget)))
    assert alloc.t == trace.t


def test_recent_b_is_the_latest_events() -> None:
    assert recent_b(10, 4) == (6, 7, 8, 9)
    assert recent_b(3, 4) == (1, 2)
    assert recent_b(1, 4) == ()
    alloc = RecentAllocator().allocate(AllocationContext(trace_with(9), 4))
    assert alloc.selected == (6, 7, 8, 9) and alloc.k == 0 and alloc.is_recent


def test_summary_only_is_empty_whatever_the_budget() -> None:
    alloc = SummaryOnlyAllocator().allocate(AllocationContext(trace_with(9), 4))
    assert alloc.selected == () and alloc.k == 0


def test_random_is_reproducible_and_varies_with_t_and_episode() -> None:
    allocator = RandomAllocator(seed=7)
    a = allocator.allocate(AllocationContext(trace_with(30), 4))
    b = allocator.allocate(AllocationContext(trace_with(30), 4))
    assert a.selected == b.selected
    draws = {allocator.allocate(AllocationContext(trace_with(30, f"e{i}"), 4)).selected for i in range(10)}
    assert len(draws) > 1
    ks = {allocator.allocate(AllocationContext(trace_with(30, f"e{i}"), 4)).k for i in range(20)}
    assert max(ks) > 0


def test_k_promoted_and_displaced() -> None:
    alloc = make_allocation([2, 7, 8, 9], t=10, budget=4, allocator="x")
    assert alloc.k == 1 and alloc.promoted == (2,) and alloc.displaced == (6,)


@pytest.mark.parametrize(
    ("selected", "t", "budget", "match"),
    [
        ([1, 2, 3], 10, 4, "exact-B"),
        ([1, 1, 2, 3], 10, 4, "repeats"),
        ([0, 1, 2, 3], 10, 4, "outside"),
        ([7, 8, 9, 10], 10, 4, "outside"),
        ([1], 1, 4, "exact-B"),
    ],
)
def test_make_allocation_rejects_violations(selected, t, budget, match) -> None:
    with pytest.raises(AllocationError, match=match):
        make_allocation(selected, t=t, budget=budget, allocator="x")


@pytest.mark.parametrize("budget", [-1, 1.5, "4", True])
def test_bad_budget_rejected(budget) -> None:
    with pytest.raises(AllocationError, match="budget"):
        recent_b(5, budget)


def test_registry_builds_and_rejects() -> None:
    assert {"recent", "random", "rgb", "summary_only", "selector"} <= set(available_allocators())
    assert build_allocator("recent").name == "recent"
    with pytest.raises(AllocationError, match="not a registered allocator"):
        build_allocator("nope")
    with pytest.raises(AllocationError, match="already registered"):
        register_allocator("recent", lambda cfg: RecentAllocator())
