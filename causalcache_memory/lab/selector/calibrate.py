"""Calibration on development data: the swap threshold (``min_gain: auto``) and the OOD guard's statistics.

**Threshold rule (stated before looking at any evaluation task).** For every dev state, take the first
step of the deployed search from Recent-B: every labelled swap out of Recent-B (``from_recent`` groups;
every recent slot when the labels cover all slots) gets the predicted gain ``d = Δ̂(j | C) - Δ̂(r | C)``;
the search would take the swap with the largest ``d`` when ``d > min_gain``. That top swap is
*non-improving* when its true utility ``Q(C ∪ {j}) - Q(Recent-B)`` is ``<= 0``. The threshold is the
smallest ``τ >= 0`` such that at most ``ALPHA`` = 1% of the dev states whose top swap is non-improving
would still take it (``d > τ``). Equivalently: the ``1 - ALPHA`` quantile, taken from above, of the
predicted gains of non-improving top swaps, floored at 0. Dev features use the gold witness (as in
training); at deployment the witness is the pass-1 proposal.

**OOD statistics** (:mod:`causalcache_memory.selector.ood`): mean and shrunk inverse covariance of the
training states' per-feature event means; threshold = the 99.9th percentile of train + dev distances.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from causalcache_memory.errors import SelectorError
from causalcache_memory.lab.selector.examples import StateExample
from causalcache_memory.selector.features import FEATURE_SCHEMA, feature_index
from causalcache_memory.selector.ood import OOD_QUANTILE, OOD_RIDGE, OOD_RULE, OodGuard, state_summary

__all__ = ["ALPHA", "THRESHOLD_RULE", "calibrate_threshold", "fit_ood", "top_swaps"]

#: largest share of non-improving dev top swaps the calibrated threshold may admit
ALPHA = 0.01
THRESHOLD_RULE = (
    "smallest min_gain >= 0 admitting at most 1% of the dev states' non-improving top swaps "
    "(first beam step from Recent-B, true utility <= 0; gold witness)"
)


def top_swaps(
    diffs: Sequence[np.ndarray], examples: Sequence[StateExample]
) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(gain, utility, task_split)`` of each state's predicted best first swap out of Recent-B.

    ``diffs[i]`` holds the predicted ``d`` of every label entry of ``examples[i]`` (``(L,)``). States
    without a ``from_recent`` group are skipped.
    """
    gains, utils, splits = [], [], []
    for d, ex in zip(diffs, examples, strict=True):
        if not len(ex.from_recent) or not ex.from_recent.any():
            continue
        keep = ex.from_recent[ex.group] & (ex.cand != ex.out)
        if not keep.any():
            continue
        idx = np.flatnonzero(keep)
        best = idx[int(np.argmax(np.asarray(d)[idx]))]
        gains.append(float(d[best]))
        utils.append(float(ex.y[best]))
        splits.append(ex.task_split)
    return np.array(gains), np.array(utils), splits


def calibrate_threshold(
    diffs: Sequence[np.ndarray], examples: Sequence[StateExample], *, alpha: float = ALPHA
) -> dict[str, Any]:
    """The calibrated ``min_gain`` and the dev fire rates it implies (see module doc)."""
    gains, utils, splits = top_swaps(diffs, examples)
    if not len(gains):
        raise SelectorError(
            "cannot calibrate the swap threshold: no dev state has a labelled swap out of Recent-B; "
            "label more trajectories (the dev split is empty or has only teacher-path groups)"
        )
    bad = np.sort(gains[utils <= 0.0])[::-1]
    allowed = int(np.floor(alpha * len(bad)))
    threshold = 0.0 if allowed >= int((bad > 0).sum()) else max(float(bad[allowed]), 0.0)
    fire = gains > threshold
    report: dict[str, Any] = {
        "min_gain": threshold,
        "rule": THRESHOLD_RULE,
        "alpha": alpha,
        "dev_states": len(gains),
        "dev_non_improving_top": len(bad),
        "dev_fire_rate": float(fire.mean()),
        "dev_fire_rate_at_0": float((gains > 0).mean()),
        "dev_non_improving_admitted": float(fire[utils <= 0].mean()) if len(bad) else 0.0,
        "dev_improving_admitted": float(fire[utils > 0].mean()) if (utils > 0).any() else 0.0,
    }
    for name in sorted(set(splits) - {""}):
        sel = np.array([s == name for s in splits])
        report[f"dev_fire_rate_{name}"] = float(fire[sel].mean())
    return report


def fit_ood(
    train: Sequence[StateExample], held_out: Sequence[StateExample], drop_features: Sequence[str] = ()
) -> tuple[OodGuard, dict[str, Any]]:
    """Fit the OOD guard on training states; its threshold covers train + ``held_out`` (dev) states."""
    drop = [feature_index(n) for n in drop_features]
    z_train = np.array([state_summary(ex.events, drop) for ex in train])
    z_dev = np.array([state_summary(ex.events, drop) for ex in held_out]).reshape(-1, len(FEATURE_SCHEMA))
    if len(z_train) < 2:
        raise SelectorError(f"the OOD guard needs at least 2 training states, got {len(z_train)}")
    mean = z_train.mean(axis=0)
    cov = np.cov(z_train, rowvar=False)
    ridge = OOD_RIDGE * max(float(np.mean(np.diag(cov))), 1e-12)
    precision = np.linalg.inv(cov + ridge * np.eye(len(mean)))
    names = tuple(n for n, _ in FEATURE_SCHEMA)
    guard = OodGuard(names, mean, (precision + precision.T) / 2.0, 1.0)
    pool = np.concatenate([z_train, z_dev])
    threshold = float(np.quantile([guard.distance(z) for z in pool], OOD_QUANTILE))
    guard = OodGuard(names, mean, guard.precision, threshold)
    report: dict[str, Any] = {"rule": OOD_RULE, "threshold": threshold, "states": len(pool)}
    if len(z_dev):
        report["dev_flagged"] = float(np.mean([guard.is_ood(z)[0] for z in z_dev]))
    return guard, report
