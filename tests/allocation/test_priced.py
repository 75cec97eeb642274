"""Recent-B with batch eviction, the prefix pricer and the priced decision (issue 50, item 4)."""

from __future__ import annotations

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.allocation import (
    AllocationContext,
    PrefixPricer,
    PricedAllocator,
    RecentAllocator,
    RecentBatchAllocator,
    make_allocation,
    recent_b,
)
from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.config.loader import parse_config
from causalcache_memory.errors import AllocationError, ConfigError
from causalcache_memory.prompt_cost import PatchImageRule, hosted_cache_model

SIZE = (1280, 800)


def trace_of(n: int, episode: str = "ep") -> Trace:
    trace = Trace("open the file", episode_id=episode)
    trace.observe("0" * 64, size=SIZE)
    for i in range(1, n + 1):
        trace.record(Action("click", x=0.5, y=0.5), "click it", f"{i:064x}", screenshot_size=SIZE)
    return trace


def pricer(layout: str = "cache_friendly") -> PrefixPricer:
    return PrefixPricer(
        layout=layout, image_rule=PatchImageRule(), cache=hosted_cache_model("anthropic-claude")
    )


class Fixed:
    """An inner allocator proposing a fixed set (or Recent-B) with given per-event scores."""

    name = "fixed"
    uses_witness = False

    def __init__(self, chosen: tuple[int, ...] | None = None, scores: dict[int, float] | None = None) -> None:
        self.chosen, self.scores = chosen, scores or {}

    def allocate(self, ctx: AllocationContext):
        chosen = self.chosen if self.chosen is not None else recent_b(ctx.t, ctx.budget)
        return make_allocation(chosen, t=ctx.t, budget=ctx.budget, allocator=self.name, scores=self.scores)


def ctx(trace: Trace, budget: int = 4) -> AllocationContext:
    return AllocationContext(trace, budget)


@pytest.mark.parametrize(
    ("events", "chunk", "expected"),
    [
        (3, 2, (1, 2, 3)),  # shorter than B: every event (appended one per step)
        (4, 2, (1, 2, 3, 4)),
        (5, 2, (1, 2, 3, 4)),  # one past B: the window holds
        (6, 2, (3, 4, 5, 6)),  # two past: it moves two at once
        (7, 2, (3, 4, 5, 6)),
        (9, 3, (4, 5, 6, 7)),  # chunk 3: the window ends at 7 = 4 + 3 until 10 events
        (7, 1, (4, 5, 6, 7)),  # chunk 1 is Recent-B
    ],
)
def test_batch_eviction_moves_the_window_in_chunks(
    events: int, chunk: int, expected: tuple[int, ...]
) -> None:
    allocation = RecentBatchAllocator(chunk).allocate(ctx(trace_of(events)))
    assert allocation.selected == expected


def test_batch_eviction_refuses_a_bad_chunk() -> None:
    with pytest.raises(AllocationError, match="chunk=0"):
        RecentBatchAllocator(0)


def test_pricer_counts_turns_from_the_first_difference_only_in_the_cache_friendly_layout() -> None:
    trace = trace_of(6)
    turn = pricer().turn_tokens(trace, 1)
    assert turn == PatchImageRule().tokens(*SIZE) + 8  # the image, and (8 + 24) / 4 for the text
    assert pricer().invalidated(trace, (1, 2, 3, 4), (1, 2, 3, 4)) == 0
    assert pricer().invalidated(trace, (1, 2, 3), (1, 2, 3, 4)) == turn  # an appended turn
    assert pricer().invalidated(trace, (1, 2, 3, 4), (1, 2, 5, 6)) == 2 * turn
    assert pricer().invalidated(trace, (1, 2, 3, 4), (2, 3, 4, 5)) == 4 * turn  # a slide rewrites all
    # the paper's layout: the summaries before the turns grow, so every turn is rewritten every step
    assert pricer("retained_turns").invalidated(trace, (1, 2, 3, 4), (1, 2, 3, 4)) == 4 * turn
    assert pricer().cost(trace, None, (1,)) == pytest.approx(turn * (1 - 0.30 / 3.75))


def test_priced_decision_holds_until_the_gain_is_worth_the_rewrite() -> None:
    allocator = PricedAllocator(RecentAllocator(), pricer(), exchange_rate=20000.0, recent_value=0.1)
    trace = trace_of(4)
    assert allocator.allocate(ctx(trace)).selected == (1, 2, 3, 4)  # first step: the proposal
    trace = trace_of(5)
    held = allocator.allocate(ctx(trace))  # Recent-B would gain 0.1 (2000 tokens) for ~5000 rewritten
    assert held.selected == (1, 2, 3, 4)
    assert held.info["price"]["choice"] == "held"
    trace = trace_of(7)  # three newest now missing: 0.3 * 20000 > the rewrite
    slid = allocator.allocate(ctx(trace))
    assert slid.selected == (4, 5, 6, 7) and slid.info["price"]["choice"] == "proposal"
    assert allocator.base_allocation(ctx(trace_of(8))).selected == (4, 5, 6, 7)  # pass 1 renders the held set


def test_a_high_exchange_rate_takes_every_change_and_the_old_layout_holds_nothing() -> None:
    eager = PricedAllocator(RecentAllocator(), pricer(), exchange_rate=1e9)
    still = PricedAllocator(RecentAllocator(), pricer("retained_turns"), exchange_rate=1.0)
    for n in range(4, 9):
        assert eager.allocate(ctx(trace_of(n))).selected == recent_b(n + 1, 4)
        assert still.allocate(ctx(trace_of(n))).selected == recent_b(n + 1, 4)
        assert still.base_allocation(ctx(trace_of(n + 1))).selected == recent_b(n + 2, 4)


def test_use_layout_switches_what_is_priced() -> None:
    allocator = PricedAllocator(RecentAllocator(), pricer(), exchange_rate=1.0)
    allocator.use_layout("retained_turns")
    allocator.allocate(ctx(trace_of(4)))
    assert allocator.allocate(ctx(trace_of(6))).selected == (3, 4, 5, 6)
    with pytest.raises(AllocationError, match="layout='sideways'"):
        allocator.use_layout("sideways")  # type: ignore[arg-type]


def test_hysteresis_keeps_a_restored_event_for_hold_steps() -> None:
    inner = Fixed((1, 4, 5, 6), scores={1: 0.5})
    allocator = PricedAllocator(inner, pricer("retained_turns"), hold_steps=2)
    assert allocator.allocate(ctx(trace_of(6))).selected == (1, 4, 5, 6)  # event 1 restored at t=7
    inner.chosen = None  # the inner allocator now proposes Recent-B
    assert 1 in allocator.allocate(ctx(trace_of(7))).selected  # t=8: still held
    assert 1 in allocator.allocate(ctx(trace_of(8))).selected  # t=9 = 7 + 2: last held step
    assert allocator.allocate(ctx(trace_of(9))).selected == (6, 7, 8, 9)  # released
    free = PricedAllocator(Fixed((1, 4, 5, 6), scores={1: 0.5}), pricer("retained_turns"), hold_steps=0)
    free.allocate(ctx(trace_of(6)))
    free.inner.chosen = None  # type: ignore[attr-defined]
    assert free.allocate(ctx(trace_of(7))).selected == (4, 5, 6, 7)


def test_threads_are_priced_apart() -> None:
    allocator = PricedAllocator(RecentAllocator(), pricer(), exchange_rate=20000.0)
    allocator.allocate(ctx(trace_of(4, "a")))
    # thread b has no previous S: its first decision is the proposal, whatever a holds
    assert allocator.allocate(ctx(trace_of(5, "b"))).selected == (2, 3, 4, 5)
    assert allocator.allocate(ctx(trace_of(5, "a"))).selected == (1, 2, 3, 4)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"exchange_rate": 0.0}, "exchange_rate=0.0"), ({"recent_value": -1.0}, "recent_value=-1.0"),
     ({"hold_steps": -1}, "hold_steps=-1")],
)  # fmt: skip
def test_bad_priced_arguments_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(AllocationError, match=field):
        PricedAllocator(RecentAllocator(), pricer(), **kwargs)


def test_config_builds_the_priced_allocator_and_refuses_unknown_models() -> None:
    config = parse_config({"budget": 4, "allocation": {"allocator": "recent", "priced": {"hold_steps": 1}}})
    allocator = build_allocator(config.allocation)
    assert isinstance(allocator, PricedAllocator) and allocator.hold_steps == 1
    assert isinstance(allocator.inner, RecentAllocator)
    batch = build_allocator(
        parse_config({"allocation": {"allocator": "recent_batch", "batch_chunk": 3}}).allocation
    )
    assert isinstance(batch, RecentBatchAllocator) and batch.chunk == 3
    with pytest.raises(ConfigError, match="no-such-provider"):
        parse_config({"allocation": {"allocator": "recent", "priced": {"cache": "no-such-provider"}}})
    with pytest.raises(ConfigError, match="exchange_rate"):
        parse_config({"allocation": {"allocator": "recent", "priced": {"exchange_rate": -2}}})


def test_the_base_slides_before_pass_one_so_a_slide_needs_no_pass_two() -> None:
    inner = Fixed()  # proposes Recent-B
    inner.uses_witness = True
    allocator = PricedAllocator(inner, pricer(), exchange_rate=20000.0, recent_value=0.1)
    assert allocator.uses_witness
    for n in range(4, 12):
        trace = trace_of(n)
        base = allocator.base_allocation(ctx(trace)).selected
        chosen = allocator.allocate(ctx(trace)).selected
        assert chosen == base  # the proposal is Recent-B: whatever the base chose, pass 2 never runs
    assert allocator.allocate(ctx(trace_of(12))).selected != recent_b(13, 4)  # it still holds at times
