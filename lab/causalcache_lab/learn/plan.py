"""The labelling plan and the refusal before any labelling: is there enough data to calibrate and guard?

Training calibrates the swap threshold on the **dev** trajectories' states and fits the OOD guard on the
**train** trajectories' states (:mod:`~causalcache_lab.selector.calibrate`). Both needs are known
before a single prompt is scored, because the split is a stable hash of the trajectory id
(:func:`~causalcache_lab.data.split.trajectory_split`, the one split of mining and training) and the labelled states of a trajectory are
fixed by :func:`~causalcache_lab.selector.labels.decision_states`:

* calibration needs at least ``MIN_DEV_STATES`` dev states and the OOD guard ``MIN_TRAIN_STATES``
  training states: the one size rule of selector training
  (:mod:`~causalcache_lab.selector.split_sizes`, which takes the guard's own need from
  :func:`~causalcache_memory.selector.ood.min_guard_states`; with 43 states for 45 features in issue 25
  every deployed state looked out of distribution). The plan checks it before labelling, training checks
  it again on the labelled states.

When only dev is short and the test split would make it up, and the user left ``train.splits`` at its
default, ``learn`` gives the test split to dev (:func:`fold_test_into_dev`: the test split only reports a
metric, and folding keeps every training trajectory where it was) instead of refusing, and says so.
When either still fails, :func:`check_plan` raises :class:`InsufficientDataError` naming how many trajectories
are needed, always more than the data at hand: at the short split's own rate (``ceil(total * need /
have)``), or, when it has no state, ``ceil(need / (states per trajectory * split fraction))`` with the
states per trajectory measured on the data at hand, and at least ``total + 1``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from causalcache_lab.data.split import trajectory_split
from causalcache_lab.selector.labels import LabelConfig, decision_states
from causalcache_lab.selector.split_sizes import MIN_DEV_STATES, MIN_TRAIN_STATES
from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.features import FEATURE_SCHEMA

__all__ = [
    "MIN_DEV_STATES",
    "InsufficientDataError",
    "LabelPlan",
    "check_plan",
    "fold_test_into_dev",
    "plan_labels",
]


class InsufficientDataError(ConfigError):
    """Too few trajectories to calibrate the threshold or to fit the OOD guard (nothing was labelled)."""


@dataclass(frozen=True)
class LabelPlan:
    """States that labelling will produce, per split (``(trajectory, t, B)`` records)."""

    trajectories: dict[str, int]
    states: dict[str, int]
    states_per_trajectory: float

    def to_dict(self) -> dict[str, Any]:
        return {
            "trajectories": self.trajectories,
            "states": self.states,
            "states_per_trajectory": round(self.states_per_trajectory, 3),
        }


def _split(traj: Any, salt: str, fractions: Sequence[float], split_by: str) -> str:
    if split_by == "metadata":
        return str(traj.metadata.get("data_split", ""))
    return trajectory_split(traj.trajectory_id, dev=fractions[1], test=fractions[2], salt=salt)


def plan_labels(
    trajectories: Sequence[Any],
    labels: LabelConfig,
    *,
    salt: str = "",
    fractions: Sequence[float] = (0.7, 0.15, 0.15),
    split_by: str = "hash",
) -> LabelPlan:
    """Count the states :func:`~...labels.run_labelling` will label, per split (no prompt is scored)."""
    trajs: Counter[str] = Counter()
    states: Counter[str] = Counter()
    for traj in trajectories:
        split = _split(traj, salt, fractions, split_by)
        trajs[split] += 1
        states[split] += sum(len(decision_states(traj, b, labels)) for b in labels.budgets)
    total = sum(states.values())
    per = total / len(trajectories) if trajectories else 0.0
    keys = ("train", "dev", "test")
    return LabelPlan({k: trajs[k] for k in keys}, {k: states[k] for k in keys}, per)


def check_plan(
    plan: LabelPlan,
    fractions: Sequence[float],
    *,
    total: int,
    need_train: int = MIN_TRAIN_STATES,
    need_dev: int = MIN_DEV_STATES,
) -> None:
    """Raise :class:`InsufficientDataError` when the plan cannot calibrate or guard (module doc).

    ``need_train`` / ``need_dev`` are training's own minimums (``train.min_train_states`` /
    ``train.min_dev_states``, lowered only for smoke runs), so the plan refuses exactly what training would."""
    problems = []
    if plan.states["train"] < need_train:
        problems.append(
            f"the OOD guard needs {need_train} training states (for {len(FEATURE_SCHEMA)} features), the "
            f"plan has {plan.states['train']}"
        )
    if plan.states["dev"] < need_dev:
        problems.append(
            f"calibrating the swap threshold needs {need_dev} dev states, the plan has {plan.states['dev']}"
        )
    if not problems:
        return
    per = plan.states_per_trajectory
    if per <= 0:
        raise InsufficientDataError(
            f"no trajectory has a decision state to label ({total} trajectories); trajectories need at "
            "least budget + 2 steps: record longer episodes"
        )
    needed = max(
        _needed(need_train, plan.states["train"], total, per * fractions[0]),
        _needed(need_dev, plan.states["dev"], total, per * fractions[1]),
    )
    shown = "more dev share (train.splits)" if math.isinf(needed) else f"about {needed} trajectories"
    raise InsufficientDataError(
        f"too little data to train a selector that deploys: {'; '.join(problems)}. With "
        f"{per:.1f} labelled states per trajectory and splits {tuple(fractions)} this needs {shown} "
        f"(have {total}: {plan.trajectories['train']} train / {plan.trajectories['dev']} dev / "
        f"{plan.trajectories['test']} test). Nothing was labelled; record more episodes and rerun"
        + _test_to_dev_hint(plan, fractions, need_train, need_dev)
        + "."
    )


def fold_test_into_dev(
    plan: LabelPlan, fractions: Sequence[float], need_train: int, need_dev: int
) -> tuple[float, float, float] | None:
    """Splits with the test share given to dev, when that is what makes the plan deployable, else None.

    Only when dev alone is short (training has its ``need_train`` states) and dev + test states reach
    ``need_dev``. The hash split puts a trajectory in test for ``u < test`` and in dev for
    ``test <= u < test + dev``, so ``(train, dev + test, 0)`` moves exactly the test trajectories to dev.
    """
    short_only_dev = plan.states["dev"] < need_dev and plan.states["train"] >= need_train
    if not short_only_dev or fractions[2] <= 0 or plan.states["dev"] + plan.states["test"] < need_dev:
        return None
    return (float(fractions[0]), round(float(fractions[1]) + float(fractions[2]), 6), 0.0)


def _test_to_dev_hint(plan: LabelPlan, fractions: Sequence[float], need_train: int, need_dev: int) -> str:
    """The refusal's second way out (explicit ``train.splits``): give the test split to dev."""
    folded = fold_test_into_dev(plan, fractions, need_train, need_dev)
    if folded is None:
        return ""
    splits = [round(folded[0], 3), round(folded[1], 3), 0.0]
    return (
        f", or give the test split to dev (train: {{splits: {splits}}}: about "
        f"{plan.states['dev'] + plan.states['test']} dev states, and no held-back test metric)"
    )


def _needed(need: int, have: int, total: int, per_trajectory: float) -> float:
    """Trajectories for ``need`` states of one split (0 when it has them): at this data's own rate
    (``have`` states from ``total`` trajectories) when the split has any, else at ``per_trajectory``
    (states per trajectory x the split's fraction) but never fewer than ``total + 1`` (the ``total`` at
    hand gave none); ``inf`` when the split's fraction is 0."""
    if have >= need:
        return 0
    if have > 0:
        return math.ceil(total * need / have)
    return max(total + 1, math.ceil(need / per_trajectory)) if per_trajectory > 0 else math.inf
