"""The mean-B budget contract: the newest events appended, a batch collapse every ``chunk`` steps (issue 50).

Exact-B (``|S| = min(B, t-1)`` at every step) makes a window that shows the newest screens change the
displayed set at every step, and a prefix cache rewrites every prompt token after the first change. The
agent's plain conversation (the ``conversation`` layout, :mod:`causalcache_memory.render.prompt`) is the
append-only prompt in which the newest screen costs nothing extra, *if* the newest event is appended and
nothing before it changes. Anthropic's computer-use reference loop therefore drops screenshots in batches
and lets their count vary. :class:`MeanBAllocator` is that contract for any inner allocator:

* between collapses ``S`` is the previous step's ``S`` with the newest event ``t-1`` appended (events
  are never evicted between collapses);
* when appending would make ``|S|`` exceed ``high = low + chunk - 1`` (``low = max(1, B - chunk // 2)``),
  a *batch collapse* picks the set again: the inner allocator's set at budget ``low`` (Recent: the
  ``low`` newest events; the learned selector: its set, restored events included);
* so once the history is long enough ``|S|`` cycles through ``low .. high`` (with ``chunk = 3``:
  ``B-1, B, B+1``) and its mean over a cycle is ``low + (chunk - 1) / 2``: ``B`` for an odd chunk,
  ``B - 1/2`` for an even one. :meth:`MeanBAllocator.size_bounds` gives the controller the sizes it
  accepts at decision ``t``.

A *swap*: when the inner allocator's proposal (at budget ``B`` between collapses, ``low`` at a collapse)
restores an event the base (the set pass 1 renders: the appended set, or at a collapse the ``low`` newest
events) lacks, the offered set is the base with the restored events in, at the base's size: the base's
events the proposal does not keep leave first, oldest first (then, if needed, its oldest others). Without a pricer every such swap is taken (the unpriced arm); with a
:class:`~causalcache_memory.allocation.priced.PrefixPricer` it is taken iff
:func:`~causalcache_memory.allocation.priced.worth_rewrite` says so::

    gain = set_value(offered) - set_value(base)                         (priced.py: recent_value, scores)
    cost = pricer.cost(trace, base, offered)    # pass 2 rewrites from the first event that differs
    take  iff  exchange_rate * gain > cost

The decision record's ``info["mean_b"]`` holds ``collapse`` (bool), ``size`` and, when a swap was
offered, ``choice`` (``proposal`` or ``held``), ``gain`` and ``cost``. Per-thread state is keyed by episode
id (``max_threads`` kept, least recent dropped first).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    Allocator,
    EpisodeStates,
    WrappingAllocator,
    make_allocation,
    recent_b,
)
from causalcache_memory.allocation.priced import LAYOUTS, PrefixPricer, set_value, worth_rewrite
from causalcache_memory.errors import AllocationError

__all__ = ["MeanBAllocator", "mean_b_sizes"]


def mean_b_sizes(budget: int, chunk: int) -> tuple[int, int]:
    """``(low, high)``: the sizes ``|S|`` cycles through once the history is long enough (module doc)."""
    low = max(1, budget - chunk // 2)
    return low, low + chunk - 1


@dataclass
class _Thread:
    selected: tuple[int, ...] = ()
    base: tuple[int, tuple[int, ...], bool] | None = None  # (t, the set pass 1 renders at t, collapse)


class MeanBAllocator(WrappingAllocator):
    """An allocator under the mean-B contract, its swaps priced when a pricer is given (module doc).

    Args:
        inner: the allocator that picks the set at a collapse and proposes swaps (Recent-B, the selector).
        chunk: steps between two collapses (>= 1; 1 keeps ``|S| = B`` and collapses at every step).
        pricer: prices a swap (None: every swap the inner allocator proposes is taken).
        exchange_rate: rewritten (write-equivalent) tokens one unit of predicted gain is worth (> 0).
        recent_value: the predicted gain of showing one Recent-B event in full (>= 0).
        max_threads: threads whose previous ``S`` is kept.
    """

    name = "mean_b"

    def __init__(
        self,
        inner: Allocator,
        *,
        chunk: int = 3,
        pricer: PrefixPricer | None = None,
        exchange_rate: float = 30000.0,
        recent_value: float = 0.1,
        max_threads: int = 1024,
    ) -> None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise AllocationError(f"chunk={chunk!r} must be an integer >= 1; set allocation.mean_b.chunk")
        if not exchange_rate > 0 or exchange_rate == float("inf"):
            raise AllocationError(f"exchange_rate={exchange_rate} must be a finite number > 0")
        if not recent_value >= 0:
            raise AllocationError(f"recent_value={recent_value} must be >= 0")
        self.inner = inner
        self.chunk = chunk
        self.pricer = pricer
        self.exchange_rate = float(exchange_rate)
        self.recent_value = float(recent_value)
        self.max_threads = max_threads
        self.uses_witness = bool(getattr(inner, "uses_witness", False))
        self._threads = EpisodeStates(_Thread, max_threads)

    def use_layout(self, layout: str) -> None:
        """Price the prompt layout the controller renders (``render.layout``; the controller calls this)."""
        if layout not in LAYOUTS:
            raise AllocationError(f"layout={layout!r} is not one of {', '.join(LAYOUTS)}; set render.layout")
        if self.pricer is not None:
            self.pricer.layout = layout  # type: ignore[assignment]

    def size_bounds(self, t: int, budget: int) -> tuple[int, int]:
        """The sizes of ``S`` this contract gives at decision ``t`` (the controller checks them)."""
        low, high = mean_b_sizes(budget, self.chunk)
        return min(low, t - 1), min(high, t - 1)

    def _thread(self, episode_id: str) -> _Thread:
        return self._threads.get(episode_id)

    def _base(self, state: _Thread, t: int, budget: int) -> tuple[tuple[int, ...], bool]:
        """The previous ``S`` with ``t-1`` appended, or (collapse) the ``low`` newest events."""
        if state.base is not None and state.base[0] == t:
            return state.base[1], state.base[2]
        low, high = mean_b_sizes(budget, self.chunk)
        kept = {j for j in state.selected if j < t} | ({t - 1} if t > 1 else set())
        # a thread met mid-episode (a restart, a step another allocator decided): topped up to ``low``
        for j in range(t - 1, 0, -1):
            if len(kept) >= min(low, t - 1):
                break
            kept.add(j)
        appended = tuple(sorted(kept))
        collapse = len(appended) > high
        base = tuple(range(t - low, t)) if collapse else appended
        state.base = (t, base, collapse)
        return base, collapse

    def base_allocation(self, ctx: AllocationContext) -> Allocation:
        """The set pass 1 renders (the appended set, or the ``low`` newest events at a collapse)."""
        base, _ = self._base(self._thread(ctx.trace.episode_id), ctx.t, ctx.budget)
        return self._allocation(base, ctx, {})

    def _allocation(
        self, chosen: tuple[int, ...], ctx: AllocationContext, scores: Any, info: Any = None
    ) -> Allocation:
        return make_allocation(
            chosen,
            t=ctx.t,
            budget=ctx.budget,
            allocator=self.name,
            scores=scores,
            info=info,
            sizes=self.size_bounds(ctx.t, ctx.budget),
        )

    def allocate(self, ctx: AllocationContext) -> Allocation:
        t, budget, trace = ctx.t, ctx.budget, ctx.trace
        state = self._thread(trace.episode_id)
        base, collapse = self._base(state, t, budget)
        low, _ = mean_b_sizes(budget, self.chunk)
        inner_ctx = replace(ctx, budget=min(low, budget)) if collapse else ctx
        proposal = self.inner.allocate(inner_ctx)
        scores = {int(j): float(s) for j, s in proposal.scores.items()}
        recent = set(recent_b(t, budget))
        new = [j for j in proposal.selected if j not in base and (collapse or j not in recent)]
        info: dict[str, Any] = {"collapse": collapse, "size": len(base)}
        chosen = base
        if new:
            offered = self._offered(base, new, set(proposal.selected))
            gain = set_value(offered, recent, scores, self.recent_value) - set_value(
                base, recent, scores, self.recent_value
            )
            cost = self.pricer.cost(trace, base, offered) if self.pricer is not None else 0.0
            take = self.pricer is None or worth_rewrite(self.exchange_rate, gain, cost)
            chosen = offered if take else base
            info.update(choice="proposal" if take else "held", gain=round(gain, 6), cost=round(cost, 1))
        state.selected = chosen
        return self._allocation(chosen, ctx, proposal.scores, {**proposal.info, "mean_b": info})

    @staticmethod
    def _offered(base: tuple[int, ...], new: list[int], proposed: set[int]) -> tuple[int, ...]:
        """The base with the restored events ``new`` in, at the base's size: the base's events the
        proposal does not keep leave first (oldest first), then, if still too many, its oldest others."""
        offered = set(base) | set(new)
        leave = sorted(j for j in base if j not in proposed) + sorted(j for j in base if j in proposed)
        for j in leave:
            if len(offered) <= len(base):
                break
            offered.discard(j)
        while len(offered) > len(base):  # more restored events than the base has room for: the newest stay
            offered.discard(min(offered))
        return tuple(sorted(offered))
