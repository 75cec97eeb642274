"""Counting decisions: :class:`DecisionStats` and the rules that classify one decision record.

The one place that says what a decision *was* (swapped, fell back and why, could have swapped, ran without
screen text, disagreed with its shadow decision). :class:`~causalcache_memory.decisions.stats.DecisionMonitor`
counts a memory's live decisions with it, and :meth:`DecisionStats.from_records` counts a thread's decision
log, so ``CausalCacheMemory.stats()``, ``causalcache report`` and the evaluation harness agree.

Shadow decisions (``allocation.compare.shadow``) are counted too: how many decisions carried one, on how
many the shadow's set differed from the executed one, and how many shadows failed or were skipped
(``shadow_selected: null``), so a live comparison's progress shows in ``stats()`` and ``causalcache
report`` before ``causalcache compare`` runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, cast

__all__ = [
    "NO_SHADOW",
    "DecisionStats",
    "fallback_kind",
    "shadow_differs",
    "swap_possible",
    "text_missing",
]

# the controller's fallback reasons (MemoryController._allocate) -> short kinds
_KINDS = (
    (re.compile(r"NonFiniteScoreError"), "non_finite"),
    (re.compile(r"^allocator '.*' exceeded \d+ ms"), "timeout"),
    (re.compile(r"^allocator '.*' is still running"), "busy"),
    (re.compile(r"^allocator '.*' failed: "), "error"),
)


def fallback_kind(reason: object) -> str | None:
    """The short kind of a decision record's ``fallback`` (None when the decision did not fall back).

    ``"ood"`` (and any other short reason an allocator puts in ``info["fallback"]``) is kept as is; the
    controller's sentences become ``"timeout"``, ``"busy"``, ``"non_finite"`` or ``"error"``.
    """
    if reason is None or reason == "":
        return None
    text = str(reason)
    for pattern, kind in _KINDS:
        if pattern.search(text):
            return kind
    return text if len(text) <= 32 and " " not in text else "other"


def text_missing(masked: object) -> bool:
    """True when a decision's ``masked`` pattern (``info["masked"]``, e.g. ``"app+text"``) names screen text."""
    return isinstance(masked, str) and "text" in masked.split("+")


#: ``shadow`` of :meth:`DecisionStats.add` when a decision has no shadow decision at all
NO_SHADOW: Any = object()


def shadow_differs(shadow: Iterable[int], selected: Iterable[int]) -> bool:
    """True when a shadow decision's set (``shadow_selected``) differs from the executed ``selected``."""
    return sorted(shadow) != sorted(selected)


def swap_possible(t: int, budget: int) -> bool:
    """True when some past event lies outside Recent-B at decision ``t`` and there is a slot to show it
    in (``0 < B < t - 1``): at ``B = 0`` nothing can be swapped in, so no idle, never-swaps or
    missing-text rule counts it (the config's budget-0 warning says what to do instead)."""
    return 0 < budget < t - 1


@dataclass
class DecisionStats:
    """Counts over a set of decisions (one thread, or one memory).

    Attributes:
        decisions: decisions counted.
        swaps: decisions whose set displaced a recent event (``k > 0``).
        second_passes: decisions that ran pass 2.
        could_swap: decisions where some past event lay outside Recent-B (the idle rule's denominator).
        fallbacks: Recent-B fallbacks by kind (:func:`fallback_kind`), e.g. ``{"ood": 12}``.
        without_text: decisions of a selector that reads screen text where no event had any
            (:func:`text_missing` of the record's ``masked``).
        shadow: decisions with a shadow decision (``allocation.compare.shadow``: the selector the
            episode does not run also decided; the record's ``shadow_selected`` is a list).
        shadow_disagreed: of those, the decisions whose shadow set differs from the executed set
            (:func:`shadow_differs`); an episode with one is *triggered* for ``causalcache compare``.
        shadow_missing: decisions recorded with shadow on whose shadow failed or was skipped
            (``shadow_selected: null``): ``causalcache compare`` falls back to all episodes for them.
        metered: decisions whose record carries ``prompt_cost`` (a :class:`~causalcache_memory.
            prompt_cost.meter.PromptCostMeter` was configured); the four totals below sum their calls.
        cache_write_tokens, cache_read_tokens, prompt_tokens: predicted prompt-cache writes, reads and
            prompt tokens of those decisions' model calls (pass 1 and pass 2).
        cache_cost: their predicted cost (USD at the cache model's prices).
    """

    decisions: int = 0
    swaps: int = 0
    second_passes: int = 0
    could_swap: int = 0
    fallbacks: dict[str, int] = field(default_factory=dict)
    without_text: int = 0
    shadow: int = 0
    shadow_disagreed: int = 0
    shadow_missing: int = 0
    metered: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0
    prompt_tokens: int = 0
    cache_cost: float = 0.0

    def add(
        self,
        *,
        t: int,
        budget: int,
        k: int,
        second_pass: bool,
        fallback: object,
        masked: object = None,
        shadow: object = NO_SHADOW,
        selected: Iterable[int] = (),
        prompt_cost: object = None,
    ) -> str | None:
        """Count one decision; returns its fallback kind.

        ``shadow`` is the decision's ``shadow_selected`` (:data:`NO_SHADOW` when it has none, as without
        ``allocation.compare.shadow``) and ``selected`` the executed set it is compared with;
        ``prompt_cost`` the record's per-call cache accounting (None: not metered; a call the meter could
        not count is None and adds nothing).
        """
        kind = fallback_kind(fallback)
        self.decisions += 1
        self.swaps += int(k > 0)
        self.second_passes += int(bool(second_pass))
        self.could_swap += int(swap_possible(t, budget))
        self.without_text += int(text_missing(masked))
        if kind is not None:
            self.fallbacks[kind] = self.fallbacks.get(kind, 0) + 1
        if isinstance(prompt_cost, list):
            self.metered += 1
            for call in prompt_cost:
                if isinstance(call, Mapping):
                    self.cache_write_tokens += int(call.get("cache_write_tokens") or 0)
                    self.cache_read_tokens += int(call.get("cache_read_tokens") or 0)
                    self.prompt_tokens += int(call.get("prompt_tokens") or 0)
                    self.cache_cost += float(call.get("cost") or 0.0)
        if shadow is None:
            self.shadow_missing += 1
        elif shadow is not NO_SHADOW:
            self.shadow += 1
            self.shadow_disagreed += int(shadow_differs(cast(Iterable[int], shadow), selected))
        return kind

    def add_record(self, record: Mapping[str, Any]) -> None:
        """Count one decision record (``StepDecision.to_record()``, an episode-log entry)."""
        self.add(
            t=int(record.get("t", 0)),
            budget=int(record.get("budget", 0)),
            k=int(record.get("k") or 0),
            second_pass=bool(record.get("second_pass")),
            fallback=record.get("fallback"),
            masked=record.get("masked"),
            shadow=record.get("shadow_selected", NO_SHADOW),
            selected=record.get("selected") or (),
            prompt_cost=record.get("prompt_cost"),
        )

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> DecisionStats:
        """Counts of a decision log (e.g. ``CausalCacheMemory.episode_log(...)``)."""
        stats = cls()
        for record in records:
            stats.add_record(record)
        return stats

    @property
    def fallback_total(self) -> int:
        return sum(self.fallbacks.values())

    def to_dict(self) -> dict[str, Any]:
        return {
            "decisions": self.decisions,
            "swaps": self.swaps,
            "second_passes": self.second_passes,
            "could_swap": self.could_swap,
            "fallbacks": dict(sorted(self.fallbacks.items())),
            "without_text": self.without_text,
            "shadow": self.shadow,
            "shadow_disagreed": self.shadow_disagreed,
            "shadow_missing": self.shadow_missing,
            **self.cache_dict(),
        }

    def cache_dict(self) -> dict[str, Any]:
        """The prompt-cache totals and their means per metered decision (step); empty when none was metered."""
        if not self.metered:
            return {}
        n = self.metered
        return {
            "metered": n,
            "cache_write_tokens": self.cache_write_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cache_cost": round(self.cache_cost, 6),
            "cache_write_per_step": round(self.cache_write_tokens / n, 1),
            "cache_read_per_step": round(self.cache_read_tokens / n, 1),
            "cache_cost_per_step": round(self.cache_cost / n, 6),
        }

    def copy(self) -> DecisionStats:
        return replace(self, fallbacks=dict(self.fallbacks))
