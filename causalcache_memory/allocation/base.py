"""Exact-B fidelity allocations and the :class:`Allocator` protocol every allocation strategy implements.

Vocabulary: an *allocator* chooses which events get the B high-fidelity slots; *policy* means the VLM
only (:class:`causalcache_memory.policy.Policy`).

An allocation at decision ``t`` with budget ``B`` is a set ``S ⊆ {1, ..., t-1}`` with
``|S| = min(B, t-1)`` (paper, Eq. 1): the budget is always filled and only *which* events occupy it
changes. ``Recent-B = {t-B, ..., t-1}`` (clipped at 1). The realized replacement intensity
``k = |S \\ Recent-B|`` is measured on every allocation, never preset.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar, runtime_checkable

from causalcache_memory.errors import AllocationError

_State = TypeVar("_State")

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.trace import Trace

__all__ = [
    "INFO_RECORD_KEYS",
    "MAX_BUDGET",
    "Allocation",
    "AllocationContext",
    "Allocator",
    "EpisodeStates",
    "WrappingAllocator",
    "check_budget",
    "exact_b_size",
    "make_allocation",
    "recent_b",
]


#: the largest budget any part of the project accepts (the paper evaluates B <= 8)
MAX_BUDGET = 64
#: keys of an allocation's ``info`` that decision records keep (the learned selector's facts:
#: docs/SELECTOR.md, "Never worse than Recent-B"; ``shadow_selected``: the other arm's set under
#: ``allocation.compare``, :mod:`~causalcache_memory.allocation.explore`; ``price``: the priced
#: decision's choice, gain and cost, :mod:`~causalcache_memory.allocation.priced`; ``mean_b``: the
#: mean-B contract's collapse, size and swap, :mod:`~causalcache_memory.allocation.mean_b`)
INFO_RECORD_KEYS = (
    "predicted_gain",
    "top_gain",
    "promoted_gain",
    "min_gain",
    "threshold_from",
    "ood_distance",
    "ood_masked",
    "ood_group",
    "ood_groups",
    "ood_refit",
    "witness_kept",
    "masked",
    "shadow_selected",
    "price",
    "mean_b",
)


def check_budget(budget: object) -> int:
    """The one budget rule: ``B`` is an integer in ``0..MAX_BUDGET`` (0 = summary-only; no bools)."""
    if isinstance(budget, bool) or not isinstance(budget, int) or not 0 <= budget <= MAX_BUDGET:
        raise AllocationError(
            f"budget={budget!r} must be an integer between 0 and {MAX_BUDGET} (0 = summary-only); "
            "set e.g. budget: 4"
        )
    return budget


def exact_b_size(t: int, budget: int) -> int:
    """``min(B, t-1)``: how many events every allocation at decision ``t`` promotes."""
    if t < 1:
        raise AllocationError(f"decision index t={t} must be >= 1")
    return min(check_budget(budget), t - 1)


def recent_b(t: int, budget: int) -> tuple[int, ...]:
    """``Recent-B``: the ``min(B, t-1)`` most recent event indices, ascending."""
    n = exact_b_size(t, budget)
    return tuple(range(t - n, t))


@dataclass(frozen=True, slots=True)
class Allocation:
    """An exact-B set of promoted events.

    Attributes:
        selected: promoted event indices ``S``, ascending.
        t: the decision index the allocation was made for.
        budget: ``B``.
        allocator: name of the allocator that produced it.
        scores: optional per-event scores the allocator computed (event index -> score), for logs.
        info: optional JSON-ready facts about the decision, for the decision log (the learned selector
            puts ``predicted_gain`` and ``min_gain`` here, and ``fallback`` (e.g. ``"ood"``) when it
            returned Recent-B instead of searching).
    """

    selected: tuple[int, ...]
    t: int
    budget: int
    allocator: str
    scores: Mapping[int, float] = field(default_factory=dict)
    info: Mapping[str, Any] = field(default_factory=dict)

    @property
    def recent(self) -> tuple[int, ...]:
        return recent_b(self.t, self.budget)

    @property
    def k(self) -> int:
        """Realized replacement intensity ``|S \\ Recent-B|``."""
        recent = set(self.recent)
        return sum(1 for j in self.selected if j not in recent)

    @property
    def is_recent(self) -> bool:
        """True when ``S`` equals Recent-B (no recent event displaced)."""
        return self.k == 0

    @property
    def promoted(self) -> tuple[int, ...]:
        """Non-recent events that entered ``S`` (``S \\ Recent-B``)."""
        recent = set(self.recent)
        return tuple(j for j in self.selected if j not in recent)

    @property
    def displaced(self) -> tuple[int, ...]:
        """Recent events that left (``Recent-B \\ S``)."""
        chosen = set(self.selected)
        return tuple(j for j in self.recent if j not in chosen)

    def to_dict(self) -> dict[str, Any]:
        return {
            "selected": list(self.selected),
            "t": self.t,
            "budget": self.budget,
            "allocator": self.allocator,
            "k": self.k,
        }


def make_allocation(
    selected: Iterable[int],
    *,
    t: int,
    budget: int,
    allocator: str,
    scores: Mapping[int, float] | None = None,
    info: Mapping[str, Any] | None = None,
    sizes: tuple[int, int] | None = None,
) -> Allocation:
    """Build an :class:`Allocation`, enforcing the exact-B contract (or ``sizes``).

    ``sizes``: ``(lo, hi)``, the sizes another budget contract allows at ``t`` (the mean-B contract,
    :mod:`causalcache_memory.allocation.mean_b`); None = exact-B.

    Raises :class:`AllocationError` if ``S`` has the wrong size, repeats an event, or names an event
    outside ``1..t-1``.
    """
    chosen = list(selected)
    size = exact_b_size(t, budget)
    if len(set(chosen)) != len(chosen):
        raise AllocationError(f"{allocator}: allocation {chosen} repeats an event; S must be a set")
    if sizes is not None:
        if not sizes[0] <= len(chosen) <= sizes[1]:
            raise AllocationError(
                f"{allocator}: allocation has {len(chosen)} events but its contract allows {sizes[0]}..{sizes[1]} "
                f"(B={budget}, t={t})"
            )
    elif len(chosen) != size:
        raise AllocationError(
            f"{allocator}: allocation has {len(chosen)} events but exact-B requires |S| = min(B, t-1) = {size} "
            f"(B={budget}, t={t})"
        )
    bad = [j for j in chosen if not isinstance(j, int) or not 1 <= j <= t - 1]
    if bad:
        raise AllocationError(f"{allocator}: events {bad} are outside the history 1..{t - 1}")
    return Allocation(
        selected=tuple(sorted(chosen)),
        t=t,
        budget=budget,
        allocator=allocator,
        scores=dict(scores or {}),
        info=dict(info or {}),
    )


@dataclass(frozen=True, slots=True)
class AllocationContext:
    """Everything an allocator may look at for decision ``t``.

    Attributes:
        trace: the complete summarized history (events ``1..t-1``) and the current screen.
        budget: ``B``.
        archive: screenshot store, for allocators that read pixels (RGB similarity, selector image stats).
        witness: reference action, e.g. the pass-1 proposal ``a_1`` (paper, "Reference actions");
            None for allocators that take none.
        episode_seed: a seed stable within the episode, for reproducible randomized allocators.
    """

    trace: Trace
    budget: int
    archive: ScreenshotArchive | None = None
    witness: Action | None = None
    episode_seed: int = 0

    @property
    def t(self) -> int:
        return self.trace.t


@runtime_checkable
class Allocator(Protocol):
    """Chooses the exact-B set of events promoted to high fidelity.

    ``uses_witness`` tells the two-pass controller whether the allocator wants the pass-1 proposal:
    allocators without a witness run a single pass. A learned selector scores the complete trace, takes the witness,
    and returns an exact-B set (Recent-B when it declines every swap).

    Optional hook (not part of the structural check): ``prepare(archive, sha256) -> None``. When an
    allocator defines it, :class:`~causalcache_memory.controller.MemoryController` calls it each time a screenshot
    is archived (``observe`` and ``record``), before the next decision's model call. It must return
    quickly and may start background work whose result :meth:`allocate` later uses; the learned selector
    prefetches the screenshot's thumbnail there, so the PNG decode overlaps the pass-1 model call. An
    exception from ``prepare`` is turned into a ``CausalCacheWarning``, never a failed step.
    """

    name: str
    uses_witness: bool

    def allocate(self, ctx: AllocationContext) -> Allocation: ...


class WrappingAllocator:
    """Base of an allocator that decides around another one (``inner``): forwards the optional hooks.

    ``prepare(archive, sha256)`` and ``close()`` reach ``inner`` when it defines them (the learned
    selector prefetches thumbnails in ``prepare`` and stops its worker in ``close``); a wrapper that
    holds more than one allocator forwards to each itself.
    """

    inner: Allocator

    def prepare(self, archive: Any, sha256: str) -> None:
        prepare = getattr(self.inner, "prepare", None)
        if prepare is not None:
            prepare(archive, sha256)

    def close(self) -> None:
        close = getattr(self.inner, "close", None)
        if close is not None:
            close()


class EpisodeStates(Generic[_State]):
    """Per-episode state of a stateful allocator, keyed by episode id (thread-safe).

    ``get`` returns the episode's state, made by ``factory`` the first time; past ``capacity`` episodes
    the least recently used is dropped (a later step of it starts from a fresh state).
    """

    def __init__(self, factory: Callable[[], _State], capacity: int) -> None:
        self.factory = factory
        self.capacity = capacity
        self._states: OrderedDict[str, _State] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, episode_id: str) -> _State:
        with self._lock:
            state = self._states.pop(episode_id, None) or self.factory()
            self._states[episode_id] = state
            while len(self._states) > self.capacity:
                self._states.popitem(last=False)
            return state

    def __len__(self) -> int:
        return len(self._states)
