"""The exact-B rule at its edges: every budget 0..MAX_BUDGET, t = 1, and the Allocation accounting."""

from __future__ import annotations

import pytest

from causalcache_memory.allocation import make_allocation, recent_b
from causalcache_memory.allocation.base import MAX_BUDGET, Allocation, check_budget, exact_b_size
from causalcache_memory.errors import AllocationError


@pytest.mark.parametrize("budget", [0, 1, MAX_BUDGET - 1, MAX_BUDGET])
def test_every_budget_up_to_the_maximum_is_accepted(budget: int) -> None:
    assert check_budget(budget) == budget
    assert exact_b_size(MAX_BUDGET + 10, budget) == budget


@pytest.mark.parametrize("budget", [-1, MAX_BUDGET + 1, True, False, 2.0, "4", None])
def test_a_budget_outside_the_rule_is_refused(budget) -> None:
    with pytest.raises(
        AllocationError, match=f"budget={budget!r} must be an integer between 0 and {MAX_BUDGET}"
    ):
        check_budget(budget)


@pytest.mark.parametrize(("t", "budget", "size"), [(1, 4, 0), (2, 4, 1), (5, 4, 4), (6, 4, 4), (3, 0, 0)])
def test_the_size_is_min_of_budget_and_history(t: int, budget: int, size: int) -> None:
    assert exact_b_size(t, budget) == size
    assert recent_b(t, budget) == tuple(range(t - size, t))


@pytest.mark.parametrize("t", [0, -1])
def test_a_decision_before_the_first_is_refused(t: int) -> None:
    with pytest.raises(AllocationError, match=f"t={t} must be >= 1"):
        exact_b_size(t, 4)


def test_the_first_decision_has_an_empty_exact_set() -> None:
    assert make_allocation([], t=1, budget=4, allocator="x").selected == ()
    with pytest.raises(AllocationError, match="outside the history"):
        make_allocation([0], t=2, budget=1, allocator="x")


@pytest.mark.parametrize("bad", [[1, 2, 3, 10], [0, 2, 3, 4], [1.0, 2, 3, 4], ["1", 2, 3, 4]])
def test_events_must_be_integers_inside_the_history(bad) -> None:
    with pytest.raises(AllocationError, match=r"outside the history 1\.\.9"):
        make_allocation(bad, t=10, budget=4, allocator="x")


def test_an_allocation_is_sorted_and_its_accounting_is_exact() -> None:
    alloc = make_allocation([9, 2, 8, 5], t=10, budget=4, allocator="beam", scores={2: 0.5})
    assert alloc.selected == (2, 5, 8, 9) and alloc.recent == (6, 7, 8, 9)
    assert alloc.k == 2 and alloc.promoted == (2, 5) and alloc.displaced == (6, 7) and not alloc.is_recent
    assert alloc.to_dict() == {"selected": [2, 5, 8, 9], "t": 10, "budget": 4, "allocator": "beam", "k": 2}
    assert dict(alloc.scores) == {2: 0.5}
    recent = make_allocation([6, 7, 8, 9], t=10, budget=4, allocator="recent")
    assert recent.k == 0 and recent.is_recent and recent.promoted == () and recent.displaced == ()
    assert Allocation((), 1, 4, "x").is_recent


def test_an_allocation_is_immutable_and_allocators_are_checked_structurally() -> None:
    import dataclasses

    from causalcache_memory.allocation import Allocator, RecentAllocator

    alloc = make_allocation([1], t=2, budget=1, allocator="x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        alloc.selected = (1, 1)  # type: ignore[misc]
    assert isinstance(RecentAllocator(), Allocator)
    assert not isinstance(object(), Allocator)


def test_context_is_frozen_with_seed_0_and_options_are_keyword_only() -> None:
    import dataclasses

    from causalcache_memory import Trace
    from causalcache_memory.allocation import AllocationContext

    ctx = AllocationContext(Trace("g"), 4)
    assert ctx.episode_seed == 0 and ctx.witness is None and ctx.archive is None and ctx.t == 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.budget = 5  # type: ignore[misc]
    with pytest.raises(TypeError):
        make_allocation([1], 2, 1, "x")  # type: ignore[misc]


def test_a_long_list_is_judged_by_its_size_not_as_a_repeat() -> None:
    with pytest.raises(AllocationError, match="has 300 events but exact-B requires"):
        make_allocation(list(range(1, 301)), t=400, budget=4, allocator="x")


def test_the_largest_budget_is_64() -> None:
    """The documented limit (config validation and docs name it): 64 is accepted, 65 is not."""
    assert MAX_BUDGET == 64
    assert check_budget(64) == 64
    with pytest.raises(AllocationError):
        check_budget(65)


def test_allocation_records_are_slotted() -> None:
    """Allocations and contexts are made at every step: slotted records (no per-instance __dict__)."""
    from causalcache_memory import Trace
    from causalcache_memory.allocation import AllocationContext

    assert not hasattr(make_allocation([1], t=2, budget=1, allocator="x"), "__dict__")
    assert not hasattr(AllocationContext(Trace("g"), 4), "__dict__")
