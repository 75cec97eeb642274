"""Untimed allocations before the timed ones: loading an allocator, filling a resumed thread's caches.

:class:`~causalcache_memory.controller.MemoryController` owns every allocation; these are the two it makes
off the clock (:meth:`~causalcache_memory.controller.MemoryController.warm_allocator`,
:meth:`~causalcache_memory.controller.MemoryController.warm`), so that no timed decision hits the
allocation time limit because of a cold start and falls back to Recent-B:

* :func:`warm_allocator`: the allocator's own ``warmup()`` hook, else (allocators that take a witness)
  one allocation on a synthetic trace of ``2B + 2`` steps without archive. Fixed rules (Recent-B, Random,
  RGB, summary-only) have nothing to load. A failure is warned about, never raised.
* :func:`warm_on_trace`: one allocation on a real (resumed) trace, result discarded: a resumed thread's
  screenshots have no thumbnails in this process yet. A failure is silent: the timed allocation reports
  it (and falls back).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from causalcache_memory.allocation.base import AllocationContext
from causalcache_memory.errors import warn

if TYPE_CHECKING:
    from causalcache_memory.allocation.base import Allocator

__all__ = ["warm_allocator", "warm_on_trace"]


def warm_allocator(allocator: Allocator, budget: int) -> None:
    """Load ``allocator`` (its ``warmup()`` hook, else one allocation on a synthetic trace; module doc)."""
    hook = getattr(allocator, "warmup", None)
    if not (callable(hook) or allocator.uses_witness):
        return
    from causalcache_memory.actions.model import Action
    from causalcache_memory.trace import Trace

    trace = Trace("warm-up", episode_id="warmup")
    trace.observe("0" * 64)
    for i in range(2 * max(1, budget) + 2):
        trace.record(Action("click", x=(i % 9) / 10, y=0.5), "warm-up", f"{i + 1:064x}")
    try:
        if callable(hook):
            hook()
        else:
            allocator.allocate(AllocationContext(trace, budget, None, witness=Action("click", x=0.5, y=0.5)))
    except Exception as exc:  # an allocator that needs the archive warms on its first real step
        warn(
            f"allocator {allocator.name!r} could not be warmed up ({type(exc).__name__}: {exc}); its "
            "first decision may be slower",
            logger=logging.getLogger(__name__),
        )


def warm_on_trace(allocator: Allocator, ctx: AllocationContext) -> None:
    """One untimed allocation on ``ctx`` (witness-taking allocators with a non-empty trace only)."""
    if not len(ctx.trace) or not allocator.uses_witness:
        return
    try:
        allocator.allocate(ctx)
    except Exception:  # the timed allocation reports (and falls back) if the allocator is broken
        return
