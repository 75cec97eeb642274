"""The OOD guard refitted on the deployment's own decisions (``allocation.selector.ood_refit: N``).

The bundled guard (:class:`~causalcache_memory.selector.ood.RobustGuard`) measures how far a state's
summary is from the *training* generator's states. :class:`RefitGuard` keeps the guarded-column
summaries of the allocator's first ``N`` featurized decisions (no labels, no scorer output) and judges
with the bundled guard during that warm-up. At the ``N``-th summary it refits the guard's location and
scale once, column by column over those ``N`` summaries ``x`` ``(N, d)``::

    center = median(x),   scale = max(1.4826 · MAD(x), 0.1)   (std(x) where the MAD is 0)

and keeps everything else: the shrunk precision (the training correlations of the standardised
columns), the dev thresholds of every mask pattern, the watched groups. From then on a state is declined
when it is far from *this deployment's* typical states, in the units the thresholds were calibrated in.
The refit is frozen (deterministic; no drift). Rule and criterion: docs/notebook/results/guard_rule.md.
"""

from __future__ import annotations

import dataclasses
import threading
from typing import Any, Literal

import numpy as np

from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.ood import GUARD_MIN_STATES, SCALE_FLOOR, RobustGuard

__all__ = [
    "DEFAULT_REFIT",
    "DEFAULT_REFIT_WARMUP",
    "GUARD_BEFORE_TRY2",
    "REFIT_RULE",
    "REFIT_WARMUPS",
    "RefitGuard",
    "check_refit",
    "check_refit_warmup",
    "refit_location_scale",
]

#: what judges during the refit's warm-up: the model's guard, or no covariate guard (the witness-source
#: check only; docs/notebook/results/guard_rule_try2.md)
REFIT_WARMUPS = ("bundled", "open")

#: the defaults (guard try 2, docs/notebook/results/guard_rule_try2.md: its criterion met on the three
#: development generators): refit on the first 64 featurized decisions, no covariate guard before that
DEFAULT_REFIT = 64
DEFAULT_REFIT_WARMUP: Literal["bundled", "open"] = "open"

#: the guard before try 2 (the defaults until 2026-12-07): the model's guard on every decision, never
#: refitted, no witness check; ``SelectorAllocator(**GUARD_BEFORE_TRY2)`` or these three config keys
GUARD_BEFORE_TRY2: dict[str, Any] = {"ood_refit": None, "ood_refit_warmup": "bundled", "witness_check": False}

REFIT_RULE = (
    "the bundled guard during the first {n} featurized decisions; then its center and scale refitted "
    "(median, max(1.4826 MAD, 0.1)) on those {n} unlabelled states, precision and thresholds kept"
)


def check_refit(value: int | None) -> int | None:
    """Validate ``ood_refit`` (None = never refit); at least :data:`GUARD_MIN_STATES` decisions."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < GUARD_MIN_STATES:
        raise SelectorError(
            f"ood_refit={value!r} must be null (the bundled guard) or an integer >= {GUARD_MIN_STATES} "
            f"(the warm-up decisions the guard is refitted on), e.g. 64"
        )
    return value


def check_refit_warmup(value: object, refit: int | None, witness_check: bool) -> str:
    """Validate ``ood_refit_warmup``: ``bundled`` or ``open``; ``open`` needs ``ood_refit`` and
    ``witness_check`` (a decision-level check judges while the covariate guard has no reference)."""
    if value not in REFIT_WARMUPS:
        raise SelectorError(
            f"ood_refit_warmup={value!r} must be one of {', '.join(REFIT_WARMUPS)} "
            "(bundled = the model's guard during the warm-up)"
        )
    if value == "open" and (refit is None or not witness_check):
        raise SelectorError(
            f"ood_refit_warmup='open' needs ood_refit (got {refit!r}) and witness_check: true (got "
            f"{witness_check!r}); 'open' is the default: set ood_refit_warmup: bundled to guard with the "
            "model's guard before the refit (or never refit), or keep ood_refit: 64 and witness_check: true"
        )
    return str(value)


def refit_location_scale(guard: RobustGuard, summaries: np.ndarray) -> RobustGuard:
    """``guard`` with ``center``/``scale`` refitted on ``summaries`` ``(n, F)`` (non-finite rows dropped)."""
    z = np.asarray(summaries, dtype=np.float64)
    x = z[:, list(guard.columns)]
    x = x[np.isfinite(x).all(axis=1)]
    if len(x) < GUARD_MIN_STATES:
        raise SelectorError(
            f"refitting the OOD guard needs at least {GUARD_MIN_STATES} finite states, got {len(x)}"
        )
    center = np.median(x, axis=0)
    scale = 1.4826 * np.median(np.abs(x - center), axis=0)
    scale = np.maximum(np.where(scale > 1e-9, scale, x.std(axis=0)), SCALE_FLOOR)
    return dataclasses.replace(guard, center=center, scale=scale)


class RefitGuard:
    """The bundled guard until ``warmup`` summaries were observed, then the refitted one (module doc).

    Thread-safe: :meth:`observe` appends under a lock; the refit happens once, on the ``warmup``-th call.
    """

    def __init__(self, guard: RobustGuard, warmup: int) -> None:
        self.bundled = guard
        self.warmup = int(check_refit(warmup) or 0)
        self._seen: list[np.ndarray] = []
        self._refitted: RobustGuard | None = None
        self._lock = threading.Lock()

    @property
    def rule(self) -> str:
        return REFIT_RULE.format(n=self.warmup)

    @property
    def refitted(self) -> bool:
        return self._refitted is not None

    @property
    def current(self) -> RobustGuard:
        """The guard that judges now: the bundled one during the warm-up, the refitted one after."""
        return self._refitted or self.bundled

    def observe(self, summary: np.ndarray) -> RobustGuard:
        """Record a decision's summary ``(F,)``; returns the guard that judges this decision.

        The decision that completes the warm-up is judged by the refitted guard.
        """
        if self._refitted is not None:
            return self._refitted
        with self._lock:
            z = np.asarray(summary, dtype=np.float64)
            if self._refitted is None and np.isfinite(z[list(self.bundled.columns)]).all():
                self._seen.append(z.copy())
                if len(self._seen) >= self.warmup:
                    self._refitted = refit_location_scale(self.bundled, np.stack(self._seen))
                    self._seen = []
            return self._refitted or self.bundled
