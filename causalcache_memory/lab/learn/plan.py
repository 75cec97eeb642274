"""The labelling plan and the refusal before any labelling: is there enough data to calibrate and guard?

Training calibrates the swap threshold on the **dev** trajectories' states and fits the OOD guard on the
**train** trajectories' states (:mod:`~causalcache_memory.lab.selector.calibrate`). Both needs are known
before a single prompt is scored, because the split is a stable hash of the trajectory id
(:func:`~causalcache_memory.lab.learn.split.trajectory_split`) and the labelled states of a trajectory are
fixed by :func:`~causalcache_memory.lab.selector.labels.decision_states`:

* calibration needs at least :data:`MIN_DEV_STATES` dev states (below that the 1% rule reads the largest
  non-improving gain, and a handful of states decide the threshold);
* the guard estimates a mean and a covariance of the per-feature state summaries: it needs at least
  :data:`GUARD_STATES_PER_FEATURE` training states per feature of the schema (with fewer -- 43 states for
  45 features in issue 25 -- every deployed state looked out of distribution).

When either fails, :func:`check_plan` raises :class:`InsufficientDataError` naming how many trajectories
are needed: ``ceil(need / (states per trajectory * split fraction))`` with the states per trajectory
measured on the data at hand.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.learn.split import trajectory_split
from causalcache_memory.lab.selector.labels import LabelConfig, decision_states
from causalcache_memory.selector.features import FEATURE_SCHEMA

__all__ = [
    "GUARD_STATES_PER_FEATURE",
    "MIN_DEV_STATES",
    "InsufficientDataError",
    "LabelPlan",
    "check_plan",
    "plan_labels",
]

#: fewest dev states the threshold calibration accepts
MIN_DEV_STATES = 30
#: training states per feature the OOD guard needs (mean + covariance of the feature summaries)
GUARD_STATES_PER_FEATURE = 2


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


def _split(traj: Any, seed: int, fractions: Sequence[float], split_by: str) -> str:
    if split_by == "metadata":
        return str(traj.metadata.get("data_split", ""))
    return trajectory_split(traj.trajectory_id, seed, fractions)


def plan_labels(
    trajectories: Sequence[Any],
    labels: LabelConfig,
    *,
    seed: int = 0,
    fractions: Sequence[float] = (0.7, 0.15, 0.15),
    split_by: str = "hash",
) -> LabelPlan:
    """Count the states :func:`~...labels.run_labelling` will label, per split (no prompt is scored)."""
    trajs: Counter[str] = Counter()
    states: Counter[str] = Counter()
    for traj in trajectories:
        split = _split(traj, seed, fractions, split_by)
        trajs[split] += 1
        states[split] += sum(len(decision_states(traj, b, labels)) for b in labels.budgets)
    total = sum(states.values())
    per = total / len(trajectories) if trajectories else 0.0
    keys = ("train", "dev", "test")
    return LabelPlan({k: trajs[k] for k in keys}, {k: states[k] for k in keys}, per)


def guard_need() -> int:
    """Training states the OOD guard needs (:data:`GUARD_STATES_PER_FEATURE` per feature)."""
    return GUARD_STATES_PER_FEATURE * len(FEATURE_SCHEMA)


def check_plan(plan: LabelPlan, fractions: Sequence[float], *, total: int) -> None:
    """Raise :class:`InsufficientDataError` when the plan cannot calibrate or guard (module doc)."""
    problems = []
    need_train, need_dev = guard_need(), MIN_DEV_STATES
    if plan.states["train"] < need_train:
        problems.append(
            f"the OOD guard needs {need_train} training states ({GUARD_STATES_PER_FEATURE} per feature of "
            f"{len(FEATURE_SCHEMA)}), the plan has {plan.states['train']}"
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
        math.ceil(need_train / (per * fractions[0])) if fractions[0] > 0 else math.inf,
        math.ceil(need_dev / (per * fractions[1])) if fractions[1] > 0 else math.inf,
    )
    shown = "more dev share (train.splits)" if math.isinf(needed) else f"about {needed} trajectories"
    raise InsufficientDataError(
        f"too little data to train a selector that deploys: {'; '.join(problems)}. With "
        f"{per:.1f} labelled states per trajectory and splits {tuple(fractions)} this needs {shown} "
        f"(have {total}: {plan.trajectories['train']} train / {plan.trajectories['dev']} dev / "
        f"{plan.trajectories['test']} test). Nothing was labelled; record more episodes and rerun."
    )
