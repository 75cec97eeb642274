"""Masked feature groups for the OOD guard: which columns a missing source zeroes, and the guard's view of them.

Some features come from a source that real data often lacks: app labels, screen text, thumbnails. The
extractor (:mod:`causalcache_memory.selector.features`) then writes 0 in every column of the group,
availability column included — masked, never invented. Each group of :data:`MASK_GROUPS` is named by a
prefix ``g``: its availability column is ``g_available`` and its columns are every feature named
``g_*`` (``app_available`` → ``app_in_goal``, ``app_differs_current``, ``app_switch_after``;
``text_available`` → every ``text_*``; ``image_available`` → every ``image_*``).

A state's **mask pattern** is the set of groups whose availability is 0 over all its events (summary mean
exactly 0), among the groups the guard watches at least one column of. A masked group carries no
information, so the guard judges such a state on the remaining guarded columns ``S`` only: the distance
``D_S(z) = sqrt(u_S^T (Σ_SS)^{-1} u_S)`` uses the marginal of the shrinkage covariance ``Σ`` (the sub-matrix
of ``Σ`` inverted, not the sub-matrix of ``Σ^{-1}``, which would be the conditional), with a threshold
calibrated for that pattern (:class:`~causalcache_memory.selector.ood.RobustGuard`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from itertools import combinations

import numpy as np

__all__ = [
    "FULL_PATTERN",
    "MASK_GROUPS",
    "group_columns",
    "marginal_precision",
    "mask_summary",
    "pattern_key",
    "patterns",
    "state_pattern",
]

#: prefixes of the feature groups the extractor masks together (availability column ``<prefix>_available``)
MASK_GROUPS: tuple[str, ...] = ("app", "text", "image")
#: the key of the pattern with every group available
FULL_PATTERN = ""


def group_columns(names: Sequence[str], watched: Iterable[int] = ()) -> dict[str, tuple[int, ...]]:
    """``{group: column indices}`` (availability column first) of the groups present in ``names``.

    With ``watched`` (the guarded column indices), only groups with at least one watched column are
    returned: masking a group the guard does not look at changes nothing.
    """
    seen = set(watched)
    out: dict[str, tuple[int, ...]] = {}
    for group in MASK_GROUPS:
        avail = f"{group}_available"
        if avail not in names:
            continue
        cols = (
            names.index(avail),
            *(i for i, n in enumerate(names) if n.startswith(f"{group}_") and n != avail),
        )
        if not seen or seen.intersection(cols):
            out[group] = cols
    return out


def pattern_key(masked: Iterable[str]) -> str:
    """The stored key of a mask pattern: the masked groups in :data:`MASK_GROUPS` order, joined by ``+``."""
    chosen = set(masked)
    return "+".join(g for g in MASK_GROUPS if g in chosen)


def patterns(groups: Iterable[str]) -> list[str]:
    """Keys of every non-empty subset of ``groups`` (the patterns a guard calibrates a threshold for)."""
    names = [g for g in MASK_GROUPS if g in set(groups)]
    return [pattern_key(c) for k in range(1, len(names) + 1) for c in combinations(names, k)]


def state_pattern(summary: np.ndarray, groups: Mapping[str, Sequence[int]]) -> str:
    """Key of the groups whose availability (first column) is exactly 0 in ``summary`` ``(F,)``."""
    return pattern_key(g for g, cols in groups.items() if summary[cols[0]] == 0.0)


def mask_summary(summary: np.ndarray, groups: Mapping[str, Sequence[int]], key: str) -> np.ndarray:
    """``summary`` as the extractor would give it with the groups of ``key`` unavailable (their columns 0).

    ``summary`` is a state summary ``(F,)`` or the state's event rows ``(N, F)`` (the last axis is the
    feature axis; a float64 copy is returned). Zeroing a group's columns in every event and taking the
    mean again is the same as zeroing them in the summary.
    """
    out = np.array(summary, dtype=np.float64)
    for group in key.split("+") if key else ():
        out[..., list(groups[group])] = 0.0
    return out


def marginal_precision(covariance: np.ndarray, keep: Sequence[int]) -> np.ndarray:
    """``(Σ_SS)^{-1}`` ``(|S|, |S|)``, symmetrised: the precision of the marginal of ``Σ`` on ``keep``."""
    if not len(keep):
        return np.zeros((0, 0))
    sub = np.linalg.inv(covariance[np.ix_(keep, keep)])
    return (sub + sub.T) / 2.0
