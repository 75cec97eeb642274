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


def test_the_window_holds_still_and_slides_once_slide_every_steps_old() -> None:
    allocator = PricedAllocator(RecentAllocator(), pricer(), slide_every=3)
    assert allocator.allocate(ctx(trace_of(4))).selected == (1, 2, 3, 4)  # t=5: fresh (Recent-B)
    for n in (5, 6):  # t=6, 7: the window holds; Recent-B restores nothing, so nothing is priced
        held = allocator.allocate(ctx(trace_of(n)))
        assert held.selected == (1, 2, 3, 4) and held.info["price"]["choice"] == "held"
    assert allocator.base_allocation(ctx(trace_of(7))).selected == (4, 5, 6, 7)  # t=8: 3 steps old
    assert allocator.allocate(ctx(trace_of(7))).selected == (4, 5, 6, 7)
    assert allocator.allocate(ctx(trace_of(8))).selected == (4, 5, 6, 7)  # fresh again: holds


def test_slide_every_one_is_recent_b_and_the_old_layout_holds_nothing() -> None:
    eager = PricedAllocator(RecentAllocator(), pricer(), slide_every=1)
    still = PricedAllocator(RecentAllocator(), pricer("retained_turns"), exchange_rate=1.0)
    for n in range(4, 9):
        assert eager.allocate(ctx(trace_of(n))).selected == recent_b(n + 1, 4)
        assert still.allocate(ctx(trace_of(n))).selected == recent_b(n + 1, 4)
        assert still.base_allocation(ctx(trace_of(n + 1))).selected == recent_b(n + 2, 4)


@pytest.mark.parametrize(("score", "taken"), [(0.1, False), (2.0, True)])
def test_a_swap_is_taken_only_when_its_gain_is_worth_the_rewrite(score: float, taken: bool) -> None:
    inner = Fixed()
    allocator = PricedAllocator(inner, pricer(), exchange_rate=10000.0, slide_every=10)
    assert allocator.allocate(ctx(trace_of(5))).selected == (2, 3, 4, 5)  # t=6: a fresh window
    inner.chosen, inner.scores = (1, 4, 5, 6), {1: score}  # t=7: restore event 1, the prompt's first turn
    trace = trace_of(6)
    out = allocator.allocate(ctx(trace))
    assert out.selected == ((1, 4, 5, 6) if taken else (2, 3, 4, 5))
    price = out.info["price"]
    assert price["choice"] == ("proposal" if taken else "held")
    # gain: the score (both sets show three Recent-B events); cost: every turn rewritten
    assert price["gain"] == pytest.approx(score)
    assert price["cost"] == pytest.approx(4 * pricer().cost(trace, None, (1,)), abs=0.1)


def test_a_restored_step_is_held_while_useful_and_leaves_when_the_window_slides() -> None:
    inner = Fixed()
    allocator = PricedAllocator(inner, pricer(), exchange_rate=1e9, hold_steps=1, slide_every=2)
    allocator.allocate(ctx(trace_of(5)))
    inner.chosen, inner.scores = (1, 4, 5, 6), {1: 0.5}
    assert allocator.allocate(ctx(trace_of(6))).selected == (1, 4, 5, 6)  # t=7: restored, a fresh window
    inner.chosen = None  # the inner allocator proposes Recent-B but still scores event 1 above 0
    assert allocator.allocate(ctx(trace_of(8))).selected == (1, 6, 7, 8)  # t=9: slid, 1 kept (useful)
    inner.scores = {}  # a declined decision gives no scores: the last one (useful) stands
    assert allocator.allocate(ctx(trace_of(9))).selected == (1, 6, 7, 8)  # t=10: the window holds
    assert allocator.allocate(ctx(trace_of(10))).selected == (1, 8, 9, 10)  # t=11: slid, 1 kept
    inner.scores = {1: -0.2}  # no longer useful and past hold_steps: it waits for the next slide
    assert allocator.allocate(ctx(trace_of(11))).selected == (1, 8, 9, 10)  # t=12: the window holds
    assert allocator.allocate(ctx(trace_of(12))).selected == (9, 10, 11, 12)  # t=13: slid, 1 left


def test_a_taken_swap_restarts_the_window_clock() -> None:
    inner = Fixed()
    allocator = PricedAllocator(inner, pricer(), exchange_rate=1e9, slide_every=3)
    allocator.allocate(ctx(trace_of(5)))  # t=6: fresh window (2, 3, 4, 5)
    inner.chosen, inner.scores = (1, 4, 5, 6), {1: 0.5}
    assert allocator.allocate(ctx(trace_of(6))).selected == (1, 4, 5, 6)  # t=7: swap, a fresh window
    inner.chosen = None
    assert allocator.allocate(ctx(trace_of(7))).selected == (1, 4, 5, 6)
    assert allocator.allocate(ctx(trace_of(8))).selected == (1, 4, 5, 6)  # t=9: 2 steps old, not 3
    assert allocator.allocate(ctx(trace_of(9))).selected == (1, 7, 8, 9)  # t=10: slid, 1 still useful


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
    inner.chosen, inner.scores = None, {1: -0.1}  # now Recent-B, and event 1 no longer scored useful
    assert 1 in allocator.allocate(ctx(trace_of(7))).selected  # t=8: still held
    assert 1 in allocator.allocate(ctx(trace_of(8))).selected  # t=9 = 7 + 2: last held step
    assert allocator.allocate(ctx(trace_of(9))).selected == (6, 7, 8, 9)  # released
    free = PricedAllocator(Fixed((1, 4, 5, 6), scores={1: 0.5}), pricer("retained_turns"), hold_steps=0)
    free.allocate(ctx(trace_of(6)))
    free.inner.chosen = None  # type: ignore[attr-defined]
    # still scored useful, but in this layout holding saves nothing: only hold_steps keeps an event
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
     ({"hold_steps": -1}, "hold_steps=-1"), ({"slide_every": 0}, "slide_every=0")],
)  # fmt: skip
def test_bad_priced_arguments_name_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(AllocationError, match=field):
        PricedAllocator(RecentAllocator(), pricer(), **kwargs)


def test_config_builds_the_priced_allocator_and_refuses_unknown_models() -> None:
    config = parse_config(
        {"budget": 4, "allocation": {"allocator": "recent", "priced": {"hold_steps": 1, "slide_every": 2}}}
    )
    allocator = build_allocator(config.allocation)
    assert isinstance(allocator, PricedAllocator) and allocator.hold_steps == 1
    assert allocator.slide_every == 2
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
    held = 0
    for n in range(4, 12):
        trace = trace_of(n)
        base = allocator.base_allocation(ctx(trace)).selected
        chosen = allocator.allocate(ctx(trace)).selected
        assert chosen == base  # the proposal is Recent-B: whatever the base chose, pass 2 never runs
        held += chosen != recent_b(n + 1, 4)
    assert held == 6  # slid at t=9 and t=13 only (slide_every 4)
