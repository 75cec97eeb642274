"""Training examples from label records: featurized states with their implied marginal targets (no torch).

Each labelled group ``(S, r, cands, q)`` gives, under conditioning set ``C = S \\ {r}``, targets
``y_j = Q(C ∪ {j}) - Q(S)`` for each candidate and ``y_r = 0`` for the evicted event itself (see
:mod:`causalcache_lab.selector.labels`). Splits are disjoint by trajectory: training splits with
the one trajectory split, :func:`causalcache_lab.data.split.trajectory_split` (as ``data mine``).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import recent_b
from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.features import FeatureExtractor, context_features

__all__ = ["StateExample", "build_examples", "states_with_gain"]


@dataclass
class StateExample:
    """One labelled ``(state, B)`` ready for the model (groups flattened; see module doc).

    ``from_recent[k]`` is True when group ``k`` swaps out of Recent-B itself: those groups are the first
    step of the beam (every swap the deployed search can take first, when labels cover every slot), which
    is what calibration reads. ``task_split`` is the trajectory's ``metadata["split"]`` (e.g.
    ``memory_critical``/``control``), empty when the data has none; ``data_split`` its
    ``metadata["data_split"]`` (``train``/``dev``/``test`` assigned by the data, e.g. by template).
    """

    trajectory_id: str
    t: int
    budget: int
    events: np.ndarray  # (N, F)
    context: np.ndarray  # (1, C)
    conds: list[tuple[int, ...]]  # K conditioning sets, 1-based
    group: np.ndarray  # (L,) conditioning-set row of each entry
    cand: np.ndarray  # (L,) 0-based event row of the candidate
    out: np.ndarray  # (L,) 0-based event row of the evicted event
    y: np.ndarray  # (L,) Q(C ∪ {j}) - Q(S); entries with cand == out have y = 0
    pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), np.int64))  # (P, 2): y[a] > y[b]
    from_recent: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))  # (K,)
    #: (K,) the decision of each group: the index of its base set ``S`` among the state's distinct base
    #: sets in label order (Recent-B is one decision, each later teacher-path set another); empty: unknown
    decision: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    task_split: str = ""
    data_split: str = ""


def build_examples(
    records: Iterable[Mapping[str, Any]],
    trajectories: Mapping[str, Any],
    *,
    extractor: FeatureExtractor | None = None,
    witness: str = "gold",
    rank_epsilon: float = 1e-3,
    max_pairs_per_group: int = 256,
    seed: int = 0,
) -> list[StateExample]:
    """Featurize label records (``trajectories`` maps id -> :class:`Trajectory`)."""
    extractor = extractor or FeatureExtractor()
    rng = random.Random(seed)
    out: list[StateExample] = []
    for rec in records:
        traj = trajectories.get(rec["trajectory_id"])
        if traj is None:
            raise ConfigError(
                f"label record {rec['key']!r} names trajectory {rec['trajectory_id']!r}, "
                "which is not in the training data; pass the trajectories that were labelled"
            )
        t, budget = int(rec["t"]), int(rec["budget"])
        ref = _witness(rec, traj, t) if witness == "gold" else None
        flat = _flatten(rec["groups"], rank_epsilon, max_pairs_per_group, rng)
        recent = sorted(recent_b(t, budget))
        out.append(
            StateExample(
                rec["trajectory_id"],
                t,
                budget,
                extractor(traj.trace_at(t), budget, ref),
                context_features(t, budget, ref),
                *flat,
                from_recent=np.array([sorted(g["base"]) == recent for g in rec["groups"]], dtype=bool),
                decision=_decisions(rec["groups"]),
                task_split=str(traj.metadata.get("split", "")),
                data_split=str(traj.metadata.get("data_split", "")),
            )
        )
    return out


def _decisions(groups: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """``(K,)`` each group's decision: the index of its base set among the record's distinct base sets."""
    index: dict[tuple[int, ...], int] = {}
    return np.array([index.setdefault(tuple(sorted(g["base"])), len(index)) for g in groups], np.int64)


def _witness(rec: Mapping[str, Any], traj: Any, t: int) -> Action:
    """The gold witness of a record: the action its labels score, i.e. the full-history reference
    action when the record has one (``labels.reference: full_history``), else the recorded step."""
    reference = rec.get("reference") or {}
    if "action" in reference:
        return Action.from_dict(reference["action"])
    return traj.steps[t - 1].action


def _flatten(groups: Sequence[Mapping[str, Any]], rank_epsilon: float, max_pairs: int, rng: random.Random):  # type: ignore[no-untyped-def]
    """``(conds, group, cand, out, y, pairs)`` arrays of one record's groups."""
    conds, group, cand, outs, ys, pairs = [], [], [], [], [], []
    for k, g in enumerate(groups):
        r = int(g["out"])
        conds.append(tuple(sorted(set(g["base"]) - {r})))
        start = len(cand)
        entries = [(int(j), float(q) - float(g["q_base"])) for j, q in zip(g["cands"], g["q"], strict=True)]
        entries.append((r, 0.0))
        for j, y in entries:
            group.append(k)
            cand.append(j - 1)
            outs.append(r - 1)
            ys.append(y)
        gp = [
            (start + a, start + b)
            for a in range(len(entries))
            for b in range(len(entries))
            if entries[a][1] > entries[b][1] + rank_epsilon
        ]
        if len(gp) > max_pairs:
            gp = rng.sample(gp, max_pairs)
        pairs.extend(gp)
    return (
        conds,
        np.array(group),
        np.array(cand),
        np.array(outs),
        np.array(ys, np.float32),
        np.array(pairs, np.int64).reshape(-1, 2),
    )


def states_with_gain(examples: Sequence[StateExample]) -> int:
    """How many states have a labelled swap that raises ``Q`` (some ``y_j > 0``): the states a selector
    can learn a swap from; the rest only teach it to keep Recent-B (RESULTS.md 9f: 14 of 233 in a
    200-episode recording, too few to improve the bundled selector)."""
    return sum(1 for ex in examples if np.any(np.asarray(ex.y) > 0.0))
