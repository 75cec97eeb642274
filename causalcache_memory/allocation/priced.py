"""A priced decision: an allocation change pays for the cached prompt prefix it invalidates (issue 50, item 4).

A provider's prompt cache reads the prefix a call shares with an earlier one and writes the rest. In the
``cache_friendly`` layout (:mod:`causalcache_memory.render.prompt`) the retained turns come right after
the system text, in event order, so a step that keeps the previous step's ``S`` rewrites none of them,
appending an event rewrites only that turn, and any other change rewrites every turn from the first one
that differs. In the paper's ``retained_turns`` layout the summaries before the turns grow at every step,
so every step rewrites every turn whatever ``S`` is: there, pricing changes no choice.

:class:`PrefixPricer` turns a candidate ``S`` into the tokens it makes the cache write again (image tokens
at each screenshot's recorded size from the model family's image rule, plus the response at about
``chars_per_token`` characters a token: an estimate, the exact count is the meter's job,
:mod:`causalcache_memory.prompt_cost.meter`), weighted by ``1 - read_price / write_price`` of the cache
model (what a rewrite costs beyond a read; 1 when the model has no prices).

:class:`PricedAllocator` wraps an allocator (Recent-B or the learned selector) and decides in two steps:

1. the *base* (:meth:`~PricedAllocator.base_allocation`, no witness needed, what pass 1 renders): the
   window is batch-evicted, not priced. The previous step's ``S`` (topped up with the newest events while
   ``|S|`` grows) holds still until its newest event is ``slide_every`` steps old; then it slides to
   Recent-B, keeping the restored events still held (below). ``slide_every = 1`` slides every step.
2. a *swap*: when the inner allocator's proposal restores an event the base does not hold, it is priced
   against the base::

       value(S) = recent_value * |S ∩ Recent-B| + Σ_{j ∈ S \\ Recent-B} max(0, score_j)
       take it  iff  exchange_rate * (value(proposal) - value(base)) > cost(proposal) - cost(base)

   ``score_j`` is the inner allocator's own per-event score (the selector's predicted swap gain),
   ``cost`` the write-equivalent tokens a set makes the cache write again after the previous step's
   ``S``, plus, for a two-pass inner allocator (pass 1 renders the base), what pass 2 writes beyond pass 1
   (:meth:`PrefixPricer.second_call`). A proposal that restores nothing new gives the base. A taken swap
   shows a fresh window (the proposal is Recent-B with swaps), so it restarts the window's clock.

Holding: an event restored from outside Recent-B stays at least ``hold_steps`` steps and after that while
the inner allocator still scores it above 0 (useful); one no longer held leaves when the window next
slides (leaving rewrites the prefix, so it waits for a rewrite that happens anyway).
In the ``retained_turns`` layout nothing is held (every set rewrites every turn): the base is Recent-B
and the proposal is taken as without pricing, a restored event kept for ``hold_steps`` steps only (holding
it while useful would only run pass 2 more often there).

Why the window is not priced like a swap (docs/notebook/results/price_tries.md): with a flat
``recent_value`` a slide of four turns is never worth its rewrite at B = 4, the window goes stale for
the rest of the episode, and a policy that checks its last action on the newest screens slips.

The decision record's ``info["price"]`` holds the choice (``proposal`` or ``held``: the base) and its
gain and cost. Per-thread state is keyed by episode id (``max_threads`` kept, least recent dropped first).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    Allocator,
    EpisodeStates,
    WrappingAllocator,
    exact_b_size,
    make_allocation,
    recent_b,
)
from causalcache_memory.errors import AllocationError

if TYPE_CHECKING:
    from causalcache_memory.prompt_cost.cache_models import (
        AutomaticPrefixCache,
        BlockPrefixCache,
        BreakpointCache,
    )
    from causalcache_memory.prompt_cost.image_tokens import AreaImageRule, PatchImageRule, TileImageRule
    from causalcache_memory.trace import Trace

__all__ = ["LAYOUTS", "PrefixPricer", "PricedAllocator", "set_value", "worth_rewrite"]

#: the layouts a :class:`PrefixPricer` prices (``render.layout``)
LAYOUTS = ("retained_turns", "cache_friendly", "conversation")


def set_value(
    selected: tuple[int, ...], recent: set[int], scores: dict[int, float], recent_value: float
) -> float:
    """``recent_value * |S ∩ Recent-B| + Σ_{j ∈ S \\ Recent-B} max(0, score_j)`` (module docstring)."""
    old = sum(max(0.0, float(scores.get(j, 0.0))) for j in selected if j not in recent)
    return recent_value * sum(1 for j in selected if j in recent) + old


def worth_rewrite(exchange_rate: float, gain: float, cost: float) -> bool:
    """The priced rule: a change is taken iff ``exchange_rate * gain > cost`` (write-equivalent tokens)."""
    return exchange_rate * gain > cost


class PrefixPricer:
    """The tokens a candidate ``S`` makes the cache write again, relative to the previous step's ``S``.

    Args:
        layout: the prompt layout (``retained_turns`` or ``cache_friendly``).
        image_rule: the model family's image-token rule.
        cache: the provider's cache model (its prices weight a rewrite); None = unweighted tokens.
        default_size: ``(width, height)`` for a screenshot whose size was not recorded.
        chars_per_token: the response-text estimate (module docstring).
    """

    def __init__(
        self,
        *,
        layout: Literal["retained_turns", "cache_friendly", "conversation"] = "cache_friendly",
        image_rule: PatchImageRule | AreaImageRule | TileImageRule,
        cache: BreakpointCache | AutomaticPrefixCache | BlockPrefixCache | None = None,
        default_size: tuple[int, int] = (1280, 800),
        chars_per_token: float = 4.0,
    ) -> None:
        if layout not in LAYOUTS:
            raise AllocationError(f"layout={layout!r} is not one of {', '.join(LAYOUTS)}; set render.layout")
        if not chars_per_token > 0:
            raise AllocationError(f"chars_per_token={chars_per_token} must be > 0 (about 4 for English)")
        self.layout = layout
        self.image_rule = image_rule
        write = cache.write if cache is not None else 0.0
        read = cache.read_price if cache is not None else 0.0
        #: what rewriting one token costs beyond reading it, as a share of a write (1 without prices)
        self.weight = 1.0 - read / write if write > 0 else 1.0
        self.default_size = default_size
        self.chars_per_token = float(chars_per_token)

    def turn_tokens(self, trace: Trace, j: int) -> int:
        """Estimated tokens of event ``j``'s retained turn (its image exactly, its text estimated)."""
        event = trace.event(j)
        w, h = event.screenshot_size or self.default_size
        text = math.ceil((len(event.response) + 24) / self.chars_per_token)  # + the header and framing
        return int(self.image_rule.tokens(int(w), int(h))) + text

    def invalidated(self, trace: Trace, previous: tuple[int, ...] | None, selected: tuple[int, ...]) -> int:
        """Tokens of ``selected``'s retained turns the cache writes again after ``previous`` (module doc).

        In the ``conversation`` layout ``previous`` is a set rendered at the same step (pass 1's): the
        prompt is rewritten from the earliest event whose membership differs, i.e. the retained turns of
        ``selected`` from that event on, the summary lines from it on, and the current screen."""
        if self.layout == "conversation":
            return self._conversation_invalidated(trace, previous, selected)
        start = 0
        if self.layout == "cache_friendly" and previous is not None:
            while start < min(len(previous), len(selected)) and previous[start] == selected[start]:
                start += 1
        return sum(self.turn_tokens(trace, j) for j in selected[start:])

    def _conversation_invalidated(
        self, trace: Trace, previous: tuple[int, ...] | None, selected: tuple[int, ...]
    ) -> int:
        changed = set(selected) ^ set(previous) if previous is not None else {1}
        if not changed:
            return 0
        first, last = min(changed), len(trace)
        # the retained turns from the first change on (event t-1's image is the current screen)
        turns = sum(self.turn_tokens(trace, j) for j in selected if j >= first)
        if last not in selected:  # the current screen comes after every change
            w, h = trace.current_screen_size or self.default_size
            turns += int(self.image_rule.tokens(int(w), int(h)))
        lines = sum(len(s) + 1 for s in trace.summaries()[first - 1 :]) / self.chars_per_token
        return turns + math.ceil(lines)

    def cost(self, trace: Trace, previous: tuple[int, ...] | None, selected: tuple[int, ...]) -> float:
        """:meth:`invalidated` weighted by the cache model's prices (write-equivalent tokens)."""
        return self.invalidated(trace, previous, selected) * self.weight

    def second_call(self, trace: Trace) -> float:
        """What a second model call of the step writes beyond its changed turns: the summaries and the
        current screen after them (the summaries' text estimated), weighted as :meth:`cost`."""
        w, h = trace.current_screen_size or self.default_size
        text = sum(len(s) + 1 for s in trace.summaries()) / self.chars_per_token
        return (int(self.image_rule.tokens(int(w), int(h))) + text) * self.weight


@dataclass
class _Thread:
    selected: tuple[int, ...] | None = None
    held_until: dict[int, int] = field(
        default_factory=dict
    )  # restored event -> last step of its minimum hold
    score: dict[int, float] = field(
        default_factory=dict
    )  # restored event -> the inner allocator's last score
    fresh_at: int = 0  # the step whose Recent-B the window (S without its restored events) last was
    base: tuple[int, tuple[int, ...] | None] | None = None  # (t, the set pass 1 rendered at t)


class PricedAllocator(WrappingAllocator):
    """Recent-B or the learned selector, with each change priced by the prefix it invalidates (module doc).

    Args:
        inner: the allocator whose proposal is priced.
        pricer: the :class:`PrefixPricer` of the deployment's layout, image rule and cache.
        exchange_rate: rewritten (write-equivalent) tokens one unit of predicted gain is worth (> 0).
        recent_value: the predicted gain of showing one Recent-B event in full (>= 0).
        hold_steps: steps a restored event stays in ``S`` at least (0 = only while scored useful).
        slide_every: the window slides once its newest event is this many steps old (1 = every step).
        max_threads: threads whose previous ``S`` is kept.
    """

    name = "priced"

    def __init__(
        self,
        inner: Allocator,
        pricer: PrefixPricer,
        *,
        exchange_rate: float = 30000.0,
        recent_value: float = 0.1,
        hold_steps: int = 3,
        slide_every: int = 4,
        max_threads: int = 1024,
    ) -> None:
        if not exchange_rate > 0 or math.isinf(exchange_rate):
            raise AllocationError(
                f"exchange_rate={exchange_rate} must be a finite number > 0 (tokens one unit of gain is worth)"
            )
        if not recent_value >= 0:
            raise AllocationError(f"recent_value={recent_value} must be >= 0")
        if isinstance(hold_steps, bool) or not isinstance(hold_steps, int) or hold_steps < 0:
            raise AllocationError(f"hold_steps={hold_steps!r} must be an integer >= 0 (0 = no minimum hold)")
        if isinstance(slide_every, bool) or not isinstance(slide_every, int) or slide_every < 1:
            raise AllocationError(f"slide_every={slide_every!r} must be an integer >= 1 (1 = every step)")
        self.inner = inner
        self.pricer = pricer
        self.exchange_rate = float(exchange_rate)
        self.recent_value = float(recent_value)
        self.hold_steps = hold_steps
        self.slide_every = slide_every
        self.max_threads = max_threads
        self.uses_witness = bool(getattr(inner, "uses_witness", False))
        self._threads = EpisodeStates(_Thread, max_threads)

    def use_layout(self, layout: Literal["retained_turns", "cache_friendly", "conversation"]) -> None:
        """Price the prompt layout the controller renders (``render.layout``; the controller calls this)."""
        if layout not in ("retained_turns", "cache_friendly"):
            raise AllocationError(
                f"layout={layout!r}: the exact-B priced decision prices retained_turns or cache_friendly; "
                "with render.layout conversation set allocation.mean_b (allocation/mean_b.py)"
            )
        self.pricer.layout = layout

    def _thread(self, episode_id: str) -> _Thread:
        return self._threads.get(episode_id)

    def _held(self, state: _Thread, t: int, budget: int) -> tuple[int, ...] | None:
        """The previous ``S`` topped up with the newest events to ``min(B, t-1)``; None when it cannot be."""
        if state.selected is None:
            return None
        kept = [j for j in state.selected if j < t]
        size = exact_b_size(t, budget)
        newest = [j for j in range(t - 1, 0, -1) if j not in kept][: max(0, size - len(kept))]
        chosen = sorted(kept + newest)
        return tuple(chosen) if len(chosen) == size else None

    def _holds(self) -> bool:
        """Whether holding ``S`` saves anything: only where the turns come before the summaries."""
        return self.pricer.layout == "cache_friendly"

    def _base(self, state: _Thread, t: int, budget: int) -> tuple[int, ...] | None:
        """The held set, slid to Recent-B (with the restored events still held) once its window is
        ``slide_every`` steps old; None where nothing is held (first step, ``retained_turns``)."""
        if state.base is not None and state.base[0] == t:
            return state.base[1]
        held = self._held(state, t, budget) if self._holds() else None
        chosen = held
        if held is not None and t - state.fresh_at >= self.slide_every:
            chosen = self._with_holds(recent_b(t, budget), state, t)
        state.base = (t, chosen)
        return chosen

    def base_allocation(self, ctx: AllocationContext) -> Allocation:
        """The set pass 1 renders: the held set, or the slid window once it is ``slide_every`` steps old
        (Recent-B on a thread's first step, and in the ``retained_turns`` layout, where holding saves
        nothing)."""
        base = self._base(self._thread(ctx.trace.episode_id), ctx.t, ctx.budget)
        chosen = base if base is not None else recent_b(ctx.t, ctx.budget)
        return make_allocation(chosen, t=ctx.t, budget=ctx.budget, allocator=self.name)

    def _value(self, selected: tuple[int, ...], recent: set[int], scores: dict[int, float]) -> float:
        return set_value(selected, recent, scores, self.recent_value)

    def _is_held(self, state: _Thread, j: int, t: int) -> bool:
        """A restored event is held for ``hold_steps`` steps, then (only where holding keeps the cached
        prefix: ``cache_friendly``) while its last score is above 0."""
        useful = self._holds() and state.score.get(j, 0.0) > 0.0
        return j < t and (state.held_until.get(j, -1) >= t or useful)

    def _with_holds(self, selected: tuple[int, ...], state: _Thread, t: int) -> tuple[int, ...]:
        """``selected`` with every held restored event put back in place of its oldest other events."""
        held = [j for j in state.held_until if self._is_held(state, j, t)]
        chosen = list(selected)
        for j in sorted(held):
            if j in chosen:
                continue
            free = [i for i in chosen if i not in held]
            if not free:
                break
            chosen.remove(min(free))
            chosen.append(j)
        return tuple(sorted(chosen))

    def allocate(self, ctx: AllocationContext) -> Allocation:
        t, budget, trace = ctx.t, ctx.budget, ctx.trace
        proposal = self.inner.allocate(ctx)
        state = self._thread(trace.episode_id)
        recent = set(recent_b(t, budget))
        base = self._base(state, t, budget)  # pass 1's set: decided on the previous step's scores
        scores = {int(j): float(s) for j, s in proposal.scores.items()}
        if scores:  # whether each restored event is still useful (kept when the inner allocator gave none)
            state.score = {j: scores.get(j, 0.0) for j in state.held_until}
        offered = self._with_holds(proposal.selected, state, t)
        price: dict[str, Any] = {"choice": "proposal", "cost": 0.0}
        chosen = offered
        if base is not None and base != offered:
            new = [j for j in offered if j not in recent and j not in base]
            if not new:  # nothing restored that the base lacks: the window's rule decides
                chosen, price = base, {"choice": "held", "gain": 0.0, "cost": 0.0}
            else:
                gain = self._value(offered, recent, scores) - self._value(base, recent, scores)
                cost = self.pricer.cost(trace, state.selected, offered) - self.pricer.cost(
                    trace, state.selected, base
                )
                if self.uses_witness:  # pass 1 rendered the base: a change also pays for pass 2
                    cost += self.pricer.second_call(trace)
                take = worth_rewrite(self.exchange_rate, gain, cost)
                chosen = offered if take else base
                price = {
                    "choice": "proposal" if take else "held",
                    "gain": round(gain, 6),
                    "cost": round(cost, 1),
                }
        for j in chosen:
            if j not in recent and j not in (state.selected or ()):
                state.held_until[j] = t + self.hold_steps  # restored now: held at least hold_steps steps
        state.held_until = {j: u for j, u in state.held_until.items() if j in chosen}
        state.score = {j: scores.get(j, state.score.get(j, 0.0)) for j in state.held_until}
        window = [j for j in chosen if j not in state.held_until]
        if window == list(range(t - len(window), t)):  # the newest events: a fresh window
            state.fresh_at = t
        state.selected = chosen
        info = {**proposal.info, "price": price}
        out = make_allocation(
            chosen, t=t, budget=budget, allocator=self.name, scores=proposal.scores, info=info
        )
        return replace(out, allocator=self.name)
