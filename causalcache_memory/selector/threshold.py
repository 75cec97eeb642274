"""The swap threshold a deployment uses: an explicit ``min_gain``, or one chosen for a pass-2 share.

Pass 2 (the second model call) runs when the beam's best first swap out of Recent-B has a predicted gain
``d > min_gain``. At training time :mod:`causalcache_lab.selector.calibrate` measures, on the dev
split's decision states, the **frontier** of every useful threshold ``τ``:

    fire(τ) = #{states: d_top > τ} / N          gain(τ) = Σ_{states: d_top > τ} y_top / N

(``d_top`` the predicted gain of a state's best first swap, ``y_top`` its true utility
``Q(C ∪ {j}) − Q(Recent-B)`` from the labels, ``N`` the dev states with a swap out of Recent-B) and stores
it in the model's ``causalcache.calibration`` metadata, pooled and per memory budget ``B`` (pass 2
fires more often at larger ``B``). ``min_gain: auto`` then picks, for the deployment's
``selector.second_pass_share`` ``b``, the threshold with the largest ``gain(τ)`` among those with
``fire(τ) <= b`` (ties: the lower fire rate) — from the stored frontiers, without retraining; a decision
at a ``B`` with its own frontier uses that one's choice, any other ``B`` the pooled choice.

A model without calibration (exported without a dev split) gets ``0`` under ``auto``. ``min_gain``
given as a number overrides both (``0`` = the paper's rule: every positive predicted gain).

**The share held on the deployment** (``selector.share_window``, default 200). A dev-calibrated
threshold is an absolute predicted gain; on screens unlike the dev worlds the scorer's gains shift and the
same threshold fires on a different share of decisions (RESULTS.md section 8: 7% on dev, 3% on held-out
worlds at ``second_pass_share`` 0.15). :class:`DeploymentThreshold` therefore re-sets the threshold from
the memory's own recent decisions: with ``d_1..d_n`` the top-swap predicted gains of the last ``n <= W``
decisions at this ``B`` that reached the scorer, sorted ascending, and ``m = floor(b * n)``,

    τ = max(d_(n - m), 0)        (τ = +inf when m = 0)

so at most ``m`` of those ``n`` decisions had ``d > τ``: pass 2 runs on about a share ``b`` of the
deployment's decisions, on its highest predicted gains, never on a non-positive one (the paper's rule is
the floor). Until ``n`` reaches the warm-up (``min(W, 20)``) the dev threshold above is used. The window
lives in the memory's process (a restart warms up again); ``min_gain`` given as a number turns it off.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from causalcache_memory.errors import SelectorError

__all__ = [
    "DEFAULT_SECOND_PASS_SHARE",
    "DEFAULT_SHARE_WINDOW",
    "SHARE_RULE",
    "DeploymentThreshold",
    "Thresholds",
    "check_share",
    "choose_threshold",
    "resolve_min_gain",
    "resolve_thresholds",
]

logger = logging.getLogger(__name__)

#: default share of decisions that may run pass 2 (``selector.second_pass_share``)
DEFAULT_SECOND_PASS_SHARE = 0.15
#: default ``selector.share_window``: decisions per ``B`` over which the share is held on the deployment
DEFAULT_SHARE_WINDOW = 200
#: decisions at one ``B`` before the deployment's own quantile replaces the dev threshold
WINDOW_WARMUP = 20
SHARE_RULE = (
    "largest dev gain (sum of the true utilities of the admitted top first swaps) among thresholds whose "
    "dev pass-2 fire rate (top swap's predicted gain > threshold) is <= second_pass_share"
)


class _Calibrated(Protocol):
    @property
    def calibration(self) -> Mapping[str, Any]: ...


def check_share(share: object, *, field: str = "second_pass_share") -> float:
    """``share`` as a float in ``[0, 1]``; :class:`SelectorError` naming the field and the fix otherwise."""
    if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0.0 <= float(share) <= 1.0:
        raise SelectorError(
            f"{field}={share!r} must be a share of decisions in [0, 1] (e.g. 0.15: at most 15% of "
            "decisions run pass 2); set it under allocation.selector"
        )
    return float(share)


def choose_threshold(frontier: Sequence[Sequence[float]], share: float) -> dict[str, float]:
    """``{"min_gain", "fire_rate", "gain"}``: the frontier point of largest gain with ``fire_rate <= share``.

    ``frontier`` rows are ``(threshold, fire_rate, gain)``. Ties in gain go to the lower fire rate. A
    frontier always holds a point that fires on no state; :class:`SelectorError` when none fits.
    """
    share = check_share(share)
    best: tuple[float, float, float] | None = None
    for row in frontier:
        tau, fire, gain = (float(v) for v in row)
        if fire > share + 1e-12:
            continue
        if best is None or gain > best[2] or (gain == best[2] and fire < best[1]):
            best = (tau, fire, gain)
    if best is None:
        raise SelectorError(
            f"no threshold of the model's frontier fires on at most {share:.3f} of the dev decisions; the "
            "calibration metadata is malformed: retrain (`causalcache train selector`)"
        )
    return {"min_gain": best[0], "fire_rate": best[1], "gain": best[2]}


@dataclass(frozen=True)
class Thresholds:
    """The swap thresholds of one deployment: per memory budget ``B`` where the model has a frontier for it.

    Attributes:
        default: ``min_gain`` for budgets without their own (the pooled frontier's choice, or the
            explicit number).
        by_budget: ``{B: min_gain}`` chosen from the per-``B`` dev frontiers (empty unless ``auto``).
        source: which rule set them (also logged).
    """

    default: float
    by_budget: Mapping[int, float] = field(default_factory=dict)
    source: str = ""

    def for_budget(self, budget: int) -> float:
        """The threshold a decision at memory budget ``budget`` uses."""
        return self.by_budget.get(budget, self.default)

    def describe(self, budget: int | None = None, *, deployment: bool = False) -> str:
        """One line that leads with the threshold in use at ``budget`` (the memory's ``B``), then the rule.

        Without ``budget``: the per-``B`` thresholds first, then the pooled one for other budgets.
        ``deployment``: a :class:`DeploymentThreshold` takes over after :data:`WINDOW_WARMUP` decisions."""
        if budget is not None:
            own = budget in self.by_budget
            which = f"B={budget}'s own dev frontier" if own else "pooled: no frontier of its own for this B"
            later = (
                f", until the deployment's own quantile replaces it after {WINDOW_WARMUP} decisions at this B"
                if deployment
                else ""
            )
            value = self.for_budget(budget)
            return f"selector swap threshold {value:.4f} at B={budget} ({which}{later}); {self.source}"
        if not self.by_budget:
            return f"selector swap threshold {self.default:.4f}: {self.source}"
        per_b = ", ".join(f"B={b}: {v:.4f}" for b, v in sorted(self.by_budget.items()))
        return f"selector swap thresholds {per_b}; {self.default:.4f} at other budgets: {self.source}"


def _auto(model: _Calibrated, share: float) -> Thresholds:
    cal = model.calibration
    frontier = cal.get("frontier")
    if frontier:
        pick = choose_threshold(frontier, share)
        by_b = {int(b): choose_threshold(f, share) for b, f in (cal.get("frontier_by_budget") or {}).items()}
        per_b = "; per memory budget " + ", ".join(
            f"B={b}: {p['min_gain']:.4f} (fire {p['fire_rate']:.3f})" for b, p in sorted(by_b.items())
        )
        return Thresholds(
            pick["min_gain"],
            {b: p["min_gain"] for b, p in by_b.items()},
            f"auto: pass-2 share {share:g} -> min_gain {pick['min_gain']:.4f} pooled (dev fire rate "
            f"{pick['fire_rate']:.3f}, dev gain {pick['gain']:.4f} per decision)"
            + (per_b if by_b else "")
            + "; from the model's dev frontiers",
        )
    return Thresholds(0.0, {}, "auto: model has no calibration, the paper's rule (0)")


def resolve_thresholds(
    min_gain: float | str, model: _Calibrated, *, second_pass_share: float = DEFAULT_SECOND_PASS_SHARE
) -> Thresholds:
    """The :class:`Thresholds` for ``min_gain``: a number >= 0, or ``"auto"`` (see module doc).

    ``auto``: the share's choice from the model's stored frontiers (one per memory budget ``B`` where
    stored, the pooled one otherwise); a model without calibration falls back to 0 (the paper's rule). A number applies to every ``B``. Which rule
    set the thresholds is in ``source`` and logged (INFO, ``causalcache_memory.selector.threshold``).
    """
    share = check_share(second_pass_share)
    if isinstance(min_gain, str):
        if min_gain != "auto":
            raise SelectorError(
                f"min_gain={min_gain!r} must be 'auto' or a number >= 0 (0 = the paper's rule)"
            )
        out = _auto(model, share)
    elif isinstance(min_gain, bool) or not (float(min_gain) >= 0.0 and math.isfinite(float(min_gain))):
        raise SelectorError(f"min_gain={min_gain!r} must be 'auto' or a number >= 0 (0 = the paper's rule)")
    else:
        out = Thresholds(float(min_gain), {}, "fixed (min_gain set explicitly; second_pass_share not used)")
    logger.info("%s", out.describe())
    return out


def resolve_min_gain(
    min_gain: float | str, model: _Calibrated, *, second_pass_share: float = DEFAULT_SECOND_PASS_SHARE
) -> tuple[float, str]:
    """``(default threshold, source)`` of :func:`resolve_thresholds` (kept for callers of one threshold)."""
    out = resolve_thresholds(min_gain, model, second_pass_share=second_pass_share)
    return out.default, out.source


def check_window(window: object, *, field: str = "share_window") -> int | None:
    """``window`` as an int >= 1 or None; :class:`SelectorError` naming the field and the fix otherwise."""
    if window is None:
        return None
    if isinstance(window, bool) or not isinstance(window, int) or window < 1:
        raise SelectorError(
            f"{field}={window!r} must be an integer >= 1 (decisions over which the pass-2 share is held "
            "on the deployment, e.g. 200) or null (use the dev-calibrated threshold only); set it under "
            "allocation.selector"
        )
    return window


class DeploymentThreshold:
    """The swap threshold that holds ``second_pass_share`` on the deployment's own decisions (module doc).

    Args:
        dev: the dev-calibrated thresholds, used per ``B`` until its window holds ``warmup`` decisions.
        share: share of decisions that may run pass 2, in ``[0, 1]``.
        window: how many of the latest decisions per ``B`` the quantile reads (``W``).
        warmup: decisions per ``B`` before the quantile is used (default ``min(W, 20)``).

    Thread-safe; :meth:`threshold` and :meth:`observe` are O(W log W) and O(1).
    """

    def __init__(self, dev: Thresholds, share: float, window: int, *, warmup: int | None = None) -> None:
        self.dev = dev
        self.share = check_share(share)
        self.window = check_window(window) or DEFAULT_SHARE_WINDOW
        self.warmup = min(self.window, WINDOW_WARMUP) if warmup is None else max(1, min(warmup, self.window))
        self._gains: dict[int, deque[float]] = {}
        self._lock = threading.Lock()

    def threshold(self, budget: int) -> tuple[float, str]:
        """``(τ, source)`` for the next decision at memory budget ``budget``: ``"dev"`` or ``"deployment"``."""
        with self._lock:
            gains = self._gains.get(budget)
            if gains is None or len(gains) < self.warmup:
                return self.dev.for_budget(budget), "dev"
            ordered = sorted(gains)
        n = len(ordered)
        m = math.floor(self.share * n + 1e-9)
        if m == 0:
            return math.inf, "deployment"
        return (max(ordered[n - m - 1], 0.0) if m < n else 0.0), "deployment"

    def observe(self, budget: int, top_gain: float) -> None:
        """Record the top-swap predicted gain of a decision at ``budget`` that reached the scorer."""
        if not math.isfinite(top_gain):
            return
        with self._lock:
            gains = self._gains.get(budget)
            if gains is None:
                gains = self._gains[budget] = deque(maxlen=self.window)
            gains.append(float(top_gain))
