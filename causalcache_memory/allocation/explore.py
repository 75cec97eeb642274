"""Exploration while recording: a stable share of episodes runs another allocator (``allocation.explore``).

A selector learns from recorded decisions. Under Recent-B alone, the episodes that succeed are those where
no distant screen was needed, so their labels hold no example of a step that needed one (docs/LEARN.md,
"Record"). :class:`ExploringAllocator` sends a share of the *episodes* to an exploring allocator (e.g.
``random``), so some successful episodes used an older screen and their teacher-forced labels carry the
signal.

The choice is per episode and stable: episode ``e`` explores iff

    u(e) = int(sha256(f"{seed}:{episode_id}")[:8]) / 2**64 < share

so every decision of an episode (and a resumed episode) uses the same allocator. Each decision record
names the allocator that chose its set (``allocator``: the base's name, or the explorer's), so the
recording says which episodes explored. ``allocation.compare`` uses the same per-episode split to run a
second selector on a share of live episodes (:func:`~causalcache_memory.allocation.registry.build_allocator`).

**Shadow decisions** (``shadow=True``; ``allocation.compare.shadow``). The allocator the episode does *not*
run also decides every step, on the same trace and witness, and its set goes into the decision record as
``shadow_selected`` (nothing else of it is used). Until the first step where the two sets differ, both
arms' episodes are the same process (same prompts, same actions), so whether an episode ever reaches a
disagreement does not depend on which arm runs it: the episodes that never do have the same outcome
distribution in both arms and only add noise to a comparison. ``causalcache compare`` therefore compares
the arms on the *triggered* episodes (those with a disagreement), the triggered analysis of online
experiments (Kohavi, Tang and Xu 2020, ch. 20). Both allocators then also see every decision (a learned
selector's deployment threshold window included), whichever arm runs. A shadow decision that fails is
logged, recorded as ``shadow_selected: null`` and never changes the step. Both decisions run inside the
controller's time limit for the allocator (``selector.timeout_ms``), so the shadow is skipped (also
``null``, and counted) when the episode's own decision took more than a third of ``shadow_limit_s``:
the shadow costs about as much again, and a step that ran out of time would fall back to Recent-B.
"""

from __future__ import annotations

import hashlib
import logging
import time
from dataclasses import replace
from typing import Any

from causalcache_memory.allocation.base import Allocation, AllocationContext, Allocator
from causalcache_memory.errors import AllocationError

__all__ = ["ExploringAllocator", "explores"]

_log = logging.getLogger("causalcache_memory.allocation.explore")


def explores(episode_id: str, *, share: float, seed: int = 0) -> bool:
    """True when episode ``episode_id`` runs the exploring allocator (module doc: ``u(e) < share``)."""
    digest = hashlib.sha256(f"{seed}:{episode_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


class ExploringAllocator:
    """``base`` on most episodes, ``explorer`` on a stable ``share`` of them (module doc).

    ``uses_witness`` is the base's or the explorer's (the two-pass controller then passes the pass-1
    proposal to both; an allocator that takes no witness ignores it). ``prepare`` (thumbnail prefetch)
    is forwarded to whichever of the two defines it.
    """

    name = "explore"

    def __init__(
        self,
        base: Allocator,
        explorer: Allocator,
        *,
        share: float,
        seed: int = 0,
        shadow: bool = False,
        shadow_limit_s: float | None = None,
    ) -> None:
        if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 < share <= 1.0:
            raise AllocationError(
                f"allocation.explore.share={share!r} must be a number in (0, 1]: the share of episodes "
                "recorded with the exploring allocator (e.g. share: 0.3)"
            )
        self.base = base
        self.explorer = explorer
        self.share = float(share)
        self.seed = int(seed)
        self.shadow = bool(shadow)
        #: the controller's time limit for one ``allocate`` (None: no limit, the shadow always runs)
        self.shadow_limit_s = shadow_limit_s
        #: shadow decisions that raised (each is logged; the step keeps its own decision)
        self.shadow_failures = 0
        #: shadow decisions skipped because the episode's own decision left too little of the time limit
        self.shadow_skipped = 0
        self.uses_witness = bool(base.uses_witness or explorer.uses_witness)

    def allocate(self, ctx: AllocationContext) -> Allocation:
        episode = ctx.trace.episode_id
        explored = explores(episode, share=self.share, seed=self.seed)
        chosen, other = (self.explorer, self.base) if explored else (self.base, self.explorer)
        if ctx.t <= 1:  # once per episode
            _log.debug("episode %s records with allocator %r", episode, chosen.name)
        if not self.shadow:
            return chosen.allocate(ctx)
        start = time.perf_counter()
        allocation = chosen.allocate(ctx)
        took = time.perf_counter() - start
        if self.shadow_limit_s is not None and took > self.shadow_limit_s / 3:
            self.shadow_skipped += 1
            first = (
                self.shadow_skipped == 1
            )  # the first skip is news: later ones are counted and logged at INFO
            _log.log(
                logging.WARNING if first else logging.INFO,
                "shadow decision of %r skipped at step %d of episode %s: %r's own took %.0f ms of the %.0f ms "
                "limit; recorded as shadow_selected: null%s",
                other.name, ctx.t, episode, chosen.name, took * 1000, self.shadow_limit_s * 1000,
                " (causalcache compare judges a comparison with such episodes on all episodes, not the "
                "triggered ones; raise allocation.selector.timeout_ms to keep shadow decisions)" if first else "",
            )  # fmt: skip
            return replace(allocation, info={**allocation.info, "shadow_selected": None})
        try:
            shadow: list[int] | None = list(other.allocate(ctx).selected)
        except Exception as exc:  # the shadow never changes the step it watches
            self.shadow_failures += 1
            _log.warning(
                "shadow decision of %r failed at step %d of episode %s (%s: %s); recorded as "
                "shadow_selected: null, the step keeps %r's decision",
                other.name, ctx.t, episode, type(exc).__name__, exc, chosen.name,
            )  # fmt: skip
            shadow = None
        return replace(allocation, info={**allocation.info, "shadow_selected": shadow})

    def prepare(self, archive: Any, sha256: str) -> None:
        for allocator in (self.base, self.explorer):
            hook = getattr(allocator, "prepare", None)
            if hook is not None:
                hook(archive, sha256)
