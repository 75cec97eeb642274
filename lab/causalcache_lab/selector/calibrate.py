"""Calibration on development data: the pass-2 frontier (``min_gain: auto``) and the OOD guard.

**Threshold rule (stated before looking at any evaluation task).** For every dev state, take the first
step of the deployed search from Recent-B: every labelled swap out of Recent-B (``from_recent`` groups;
every recent slot when the labels cover all slots) gets the predicted gain ``d = Δ̂(j | C) - Δ̂(r | C)``;
the search takes the swap with the largest ``d`` (pass 2 fires) when ``d > min_gain``, and its true
utility ``y = Q(C ∪ {j}) - Q(Recent-B)`` is what that swap gains. For every threshold ``τ >= 0`` that
changes which states fire, :func:`pass2_frontier` records the dev fire rate and the dev gain per state
(:mod:`causalcache_memory.selector.threshold`), keeping the points no lower-fire point beats. Pass 2
fires more often at a larger memory budget ``B`` (more distant events and slots), so one frontier is kept
per ``B`` with at least :data:`MIN_STATES_PER_BUDGET` dev states, besides the pooled one used for other
``B``. The stored ``min_gain`` is the pooled choice for the training budget (:data:`~causalcache_memory.selector.threshold.
DEFAULT_SECOND_PASS_SHARE`, 0.15): the most dev gain with a dev fire rate within that share. A deployment
with another ``second_pass_share`` re-chooses from the stored frontier. Dev features use the gold
witness (as in training); at deployment the witness is the pass-1 proposal.

**OOD guard** (:class:`causalcache_memory.selector.ood.RobustGuard`): fitted on the training states'
summaries, threshold set on the dev states at a 1% false-alarm rate; one threshold per mask pattern of
the groups it watches (app labels, screen text, thumbnails missing), set on the dev states with those
groups masked (:mod:`causalcache_memory.selector.ood_masks`), at the same rate. The report gives each
pattern's threshold and dev false-alarm rate, and how many dev states carry each pattern as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from causalcache_lab.selector.examples import StateExample
from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.features import FEATURE_SCHEMA, feature_index
from causalcache_memory.selector.ood import FALSE_ALARM_RATE, GuardFitError, RobustGuard, state_summary
from causalcache_memory.selector.ood_masks import mask_summary
from causalcache_memory.selector.threshold import (
    DEFAULT_SECOND_PASS_SHARE,
    SHARE_RULE,
    check_share,
    choose_threshold,
)

__all__ = ["THRESHOLD_RULE", "calibrate_ood", "calibrate_threshold", "fit_ood", "pass2_frontier", "top_swaps"]

logger = logging.getLogger(__name__)

THRESHOLD_RULE = SHARE_RULE + (
    ", per memory budget B with at least 30 dev states (else pooled over B); first beam step from "
    "Recent-B on the dev states; gold witness"
)
#: fewest dev states of one memory budget ``B`` for a frontier of its own
MIN_STATES_PER_BUDGET = 30


def top_swaps(
    diffs: Sequence[np.ndarray], examples: Sequence[StateExample], *, with_budgets: bool = False
) -> tuple[np.ndarray, ...] | tuple[np.ndarray, np.ndarray, list[str]]:
    """``(gain, utility, task_split)`` of each state's predicted best first swap out of Recent-B.

    ``diffs[i]`` holds the predicted ``d`` of every label entry of ``examples[i]`` (``(L,)``). States
    without a ``from_recent`` group are skipped. ``with_budgets`` appends each state's memory budget ``B``.
    """
    gains, utils, splits, budgets = [], [], [], []
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
        budgets.append(int(ex.budget))
    if with_budgets:
        return np.array(gains), np.array(utils), splits, np.array(budgets, dtype=int)  # type: ignore[return-value]
    return np.array(gains), np.array(utils), splits


def pass2_frontier(gains: np.ndarray, utils: np.ndarray) -> list[list[float]]:
    """``[[τ, fire_rate, gain], ...]`` for the thresholds ``τ >= 0`` that change which states fire.

    ``gains`` / ``utils`` ``(N,)`` are each dev state's top-swap predicted gain and true utility. A state
    fires when ``gain > τ``; ``fire_rate`` = fired / N, ``gain`` = Σ utils of fired / N. Only points whose
    gain beats every point of lower fire rate are kept (enough for :func:`choose_threshold` at any
    budget); the first point fires on no state.
    """
    g = np.asarray(gains, dtype=np.float64)
    u = np.asarray(utils, dtype=np.float64)
    n = len(g)
    order = np.argsort(-g, kind="stable")
    cum = np.concatenate([[0.0], np.cumsum(u[order])])
    desc = g[order]
    taus = np.unique(np.concatenate([np.maximum(g, 0.0), [0.0]]))[::-1]  # high -> low: fire rate rises
    points, best = [], -np.inf
    for tau in taus:
        fired = int(np.searchsorted(-desc, -tau, side="left"))  # states with gain > tau
        value = float(cum[fired]) / n
        if not points or value > best:
            points.append([float(tau), fired / n, value])
            best = value
    return points


def calibrate_threshold(
    diffs: Sequence[np.ndarray],
    examples: Sequence[StateExample],
    *,
    share: float = DEFAULT_SECOND_PASS_SHARE,
) -> dict[str, Any]:
    """The dev pass-2 frontier, the threshold it gives for ``share`` and the dev rates (see module doc)."""
    share = check_share(share, field="share")
    gains, utils, splits, memory = top_swaps(diffs, examples, with_budgets=True)
    if not len(gains):
        raise SelectorError(
            "cannot calibrate the swap threshold: no dev state has a labelled swap out of Recent-B; "
            "label more trajectories (the dev split is empty or has only teacher-path groups)"
        )
    frontier = pass2_frontier(gains, utils)
    pick = choose_threshold(frontier, share)
    threshold = pick["min_gain"]
    fire = gains > threshold
    bad = utils <= 0.0
    report: dict[str, Any] = {
        "min_gain": threshold,
        "rule": THRESHOLD_RULE,
        "second_pass_share": share,
        "dev_states": len(gains),
        "dev_fire_rate": float(fire.mean()),
        "dev_gain": float(utils[fire].sum() / len(gains)),
        "dev_fire_rate_at_0": float((gains > 0).mean()),
        "dev_gain_at_0": float(utils[gains > 0].sum() / len(gains)),
        "dev_oracle_gain": float(np.maximum(utils, 0.0).sum() / len(gains)),
        "dev_non_improving_top": int(bad.sum()),
        "dev_non_improving_admitted": float(fire[bad].mean()) if bad.any() else 0.0,
        "dev_improving_admitted": float(fire[~bad].mean()) if (~bad).any() else 0.0,
        "frontier": frontier,
        "frontier_by_budget": {},
    }
    for b in sorted(set(memory.tolist())):  # per memory budget B: pass 2 fires more often at larger B
        sel = memory == b
        if sel.sum() >= MIN_STATES_PER_BUDGET:
            report["frontier_by_budget"][str(b)] = pass2_frontier(gains[sel], utils[sel])
    for name in sorted(set(splits) - {""}):
        sel = np.array([s == name for s in splits])
        report[f"dev_fire_rate_{name}"] = float(fire[sel].mean())
    return report


def fit_ood(
    train: Sequence[StateExample],
    held_out: Sequence[StateExample],
    drop_features: Sequence[str] = (),
    *,
    false_alarm_rate: float = FALSE_ALARM_RATE,
) -> tuple[RobustGuard, dict[str, Any]]:
    """Fit the OOD guard on the training states; its threshold flags ``false_alarm_rate`` of ``held_out`` (dev).

    With no dev states the threshold is set on the training states (said in the report's ``split``).
    Raises :class:`~causalcache_memory.selector.ood.GuardFitError` when there are too few training states.
    """
    drop = [feature_index(n) for n in drop_features]
    width = len(FEATURE_SCHEMA)
    z_train = np.array([state_summary(ex.events, drop) for ex in train]).reshape(-1, width)
    z_dev = np.array([state_summary(ex.events, drop) for ex in held_out]).reshape(-1, width)
    names = [n for n, _ in FEATURE_SCHEMA]
    guard = RobustGuard.fit(names, z_train, z_dev, drop=drop, false_alarm_rate=false_alarm_rate)
    report: dict[str, Any] = {
        "rule": guard.rule,
        "threshold": guard.threshold,
        "false_alarm_rate": false_alarm_rate,
        "split": "dev" if len(z_dev) else "train (no dev states)",
        "train_states": len(z_train),
        "dev_states": len(z_dev),
        "columns": [names[i] for i in guard.columns],
        "shrinkage": guard.shrinkage,
    }
    if len(z_dev):
        report["dev_flagged"] = float(np.mean([guard.is_ood(z)[0] for z in z_dev]))
    report["train_flagged"] = float(np.mean([guard.is_ood(z)[0] for z in z_train]))
    report.update(_mask_report(guard, z_dev if len(z_dev) else z_train))
    return guard, report


def _mask_report(guard: RobustGuard, pool: np.ndarray) -> dict[str, Any]:
    """Per mask pattern: threshold and the share of ``pool`` flagged with those groups masked; pool patterns."""
    groups = guard.mask_groups
    flagged = {
        key: float(np.mean([guard.is_ood(mask_summary(z, groups, key))[0] for z in pool]))
        for key in guard.mask_thresholds
    }
    counts: dict[str, int] = {}
    for z in pool:
        key = guard.pattern(z) or "none"
        counts[key] = counts.get(key, 0) + 1
    return {
        "mask_groups": {g: [guard.features[i] for i in cols] for g, cols in groups.items()},
        "mask_patterns": {
            key: {"threshold": t, "flagged": flagged[key]} for key, t in guard.mask_thresholds.items()
        },
        "masked_in_pool": counts,
    }


def calibrate_ood(
    train: Sequence[StateExample], held_out: Sequence[StateExample], drop_features: Sequence[str] = ()
) -> dict[str, Any]:
    """The model's ``ood`` metadata: :func:`fit_ood`'s report plus ``guard`` (its JSON).

    With too few training states the model is trained without a guard: ``{"skipped": reason}`` and a
    WARNING (``causalcache_lab.selector.calibrate``); such a model is not guarded at deployment.
    Callers that must refuse instead call :func:`~causalcache_memory.selector.ood.guard_fit_size_check`.
    """
    try:
        guard, report = fit_ood(train, held_out, drop_features)
    except GuardFitError as exc:
        logger.warning("selector trained without an OOD guard: %s", exc)
        return {"skipped": str(exc)}
    return {**report, "guard": guard.to_json()}
