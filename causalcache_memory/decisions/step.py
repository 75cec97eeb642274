"""The outcome of one decision (:class:`StepDecision`) and its small JSON record (no pixels).

:class:`~causalcache_memory.controller.MemoryController` returns one per :meth:`decide
<causalcache_memory.controller.MemoryController.decide>`; :meth:`StepDecision.to_record` is what the
stream events, the episode log and the decision counts (:mod:`causalcache_memory.decisions.counts`) read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from causalcache_memory.allocation.base import INFO_RECORD_KEYS, Allocation

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.policy import Generation

__all__ = ["StepDecision"]


@dataclass(frozen=True)
class StepDecision:
    """Outcome of one decision.

    Attributes:
        t: decision index.
        generation: the emitted generation (``a_2`` when pass 2 fired, else ``a_1``).
        allocation: the final set ``S*`` the emitted action was decided on.
        proposal: the pass-1 generation (``a_1``) when two passes were planned, else None.
        second_pass: whether pass 2 ran.
        pass_latency_s: wall time of each model call, in order.
        selector_latency_s: wall time of the allocation decision.
        fallback: why the step fell back to Recent-B (None when it did not).
    """

    t: int
    generation: Generation
    allocation: Allocation
    proposal: Generation | None = None
    second_pass: bool = False
    pass_latency_s: tuple[float, ...] = ()
    selector_latency_s: float = 0.0
    fallback: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def action(self) -> Action | None:
        return self.generation.action

    @property
    def response(self) -> str:
        return self.generation.response

    def to_record(self) -> dict[str, Any]:
        """Small JSON-serializable record (no pixels) for stream events and the episode log."""
        record: dict[str, Any] = {
            "t": self.t,
            "budget": self.allocation.budget,
            "allocator": self.allocation.allocator,
            "selected": list(self.allocation.selected),
            "recent": list(self.allocation.recent),
            "k": self.allocation.k,
            "second_pass": self.second_pass,
            "pass_latency_ms": [round(x * 1000.0, 3) for x in self.pass_latency_s],
            "selector_latency_ms": round(self.selector_latency_s * 1000.0, 3),
            "action": self.generation.action.to_dict() if self.generation.action else None,
            "parse_error": self.generation.parse_error,
            "fallback": self.fallback,
        }
        if self.proposal is not None:
            record["proposal"] = self.proposal.action.to_dict() if self.proposal.action else None
        for key in INFO_RECORD_KEYS:  # the learned selector's facts
            if key in self.allocation.info:
                record[key] = self.allocation.info[key]
        # prefix-cache reuse per model call (pass 1, then pass 2), when the runtime reports it
        passes = (
            [self.proposal, self.generation]
            if self.second_pass and self.proposal is not None
            else [self.generation]
        )
        if any(g.cached_tokens is not None for g in passes):
            record["cached_tokens"] = [g.cached_tokens for g in passes]
            record["prompt_tokens"] = [g.meta.get("prompt_tokens") for g in passes]
        if "prompt_cost" in self.extra:  # predicted cache reads/writes per call (a PromptCostMeter)
            record["prompt_cost"] = list(self.extra["prompt_cost"])
        return record
