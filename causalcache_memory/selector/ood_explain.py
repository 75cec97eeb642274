"""Which feature group made the OOD guard decline a state: the guard's distance split by group.

The robust guard (:class:`~causalcache_memory.selector.ood.RobustGuard`) declines a state when
``D(z)^2 = u^T P u`` exceeds its threshold (``u`` the robustly standardised summary over the guarded
columns, ``P`` the shrunk precision, or the marginal one of the state's mask pattern). That square splits
exactly over any partition of the columns into groups ``G``::

    D^2 = sum_G c_G,    c_G = u_G . (P u)_G

(the contribution of a group: its own squared distance plus its share of the cross terms; a group whose
columns pull against the others' can be slightly negative). :func:`group_contributions` returns the shares
``c_G / D^2`` of :data:`FEATURE_GROUPS`, and :func:`far_group` the largest: the group to name in a warning
("the screen-text features were far from training"), and what the record's ``ood_group`` says.

Groups (by feature name, the schema of :mod:`~causalcache_memory.selector.schema`): ``text`` (``text_*``,
the screen text), ``image`` (``image_*``), ``app`` (``app_*``), ``summary`` (overlaps of the one-line
summaries with the goal and the proposed action: ``goal_*``, ``ref_*``, ``next_ref_*``), ``action``
(action types and matches with the proposal: ``witness_*``, ``next_*``, ``own_*``, ``event_type_*``) and
``position`` (ages, recency, the budget and the decision's position: everything else). Cost: one
``(d, d)`` matrix-vector product, run only on declined decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from causalcache_memory.selector.ood import RobustGuard

__all__ = ["FEATURE_GROUPS", "far_group", "feature_group", "group_contributions"]

#: explanation groups, in the order they are reported
FEATURE_GROUPS: tuple[str, ...] = ("text", "image", "app", "summary", "action", "position")
_PREFIXES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("text", ("text_",)),
    ("image", ("image_",)),
    ("app", ("app_",)),
    ("summary", ("goal_", "ref_", "next_ref_")),
    ("action", ("witness_", "next_", "own_", "event_type_")),
)


def feature_group(name: str) -> str:
    """The :data:`FEATURE_GROUPS` entry of feature ``name`` (``position`` when no prefix matches)."""
    for group, prefixes in _PREFIXES:
        if name.startswith(prefixes):
            return group
    return "position"


def _split(names: Sequence[str], u: np.ndarray, precision: np.ndarray) -> dict[str, float]:
    pu = precision @ u
    total = float(u @ pu)
    out: dict[str, float] = {}
    for name, ui, pi in zip(names, u, pu, strict=True):
        group = feature_group(name)
        out[group] = out.get(group, 0.0) + float(ui * pi)
    if not total > 0.0 or not np.isfinite(total):
        return {}
    return {g: round(out[g] / total, 3) for g in FEATURE_GROUPS if g in out}


def group_contributions(guard: RobustGuard, summary: np.ndarray) -> dict[str, float]:
    """Shares ``c_G / D^2`` of each group in the guard's distance of ``summary`` (under its mask pattern).

    Empty for a non-finite summary or a zero distance. Groups the guard does not watch are absent.
    """
    z = np.asarray(summary, dtype=np.float64)
    if not np.isfinite(z).all():
        return {}
    positions, precision = guard.view(guard.pattern(z))
    cols = [guard.columns[p] for p in positions]
    u = (z[cols] - guard.center[positions]) / guard.scale[positions]
    return _split([guard.features[c] for c in cols], u, precision)


def far_group(contributions: dict[str, float]) -> str | None:
    """The group with the largest share (None when there is none)."""
    return max(contributions, key=lambda g: contributions[g]) if contributions else None
