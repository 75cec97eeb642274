"""Bootstrap statistics used by every evaluation (closed loop, allocation ladder, DiD gates).

All intervals are percentile bootstrap intervals over *clusters* (tasks, episodes or trajectories):
resampling whole clusters keeps within-cluster correlation (several states of one episode, several runs
of one task) from shrinking the interval.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = [
    "Estimate",
    "cluster_bootstrap",
    "count_harm",
    "harm_rates",
    "paired_difference",
    "split_interaction",
]


@dataclass(frozen=True, slots=True)
class Estimate:
    """A point estimate with a percentile bootstrap interval."""

    value: float
    low: float
    high: float
    n: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0.0 or self.high < 0.0

    def to_dict(self) -> dict[str, float | int | list[float]]:
        return {"value": self.value, "ci95": [self.low, self.high], "n": self.n}


def _cluster_means(values: np.ndarray, clusters: Sequence[Hashable] | None) -> tuple[np.ndarray, np.ndarray]:
    """Per-cluster sums and counts, so a resample of clusters gives the pooled mean."""
    if clusters is None:
        return values.astype(float), np.ones(len(values))
    index: dict[Hashable, int] = {}
    ids = np.array([index.setdefault(c, len(index)) for c in clusters])
    sums = np.bincount(ids, weights=values, minlength=len(index))
    counts = np.bincount(ids, minlength=len(index)).astype(float)
    return sums, counts


def cluster_bootstrap(
    values: Sequence[float],
    clusters: Sequence[Hashable] | None = None,
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Mean of ``values`` with a cluster bootstrap interval.

    ``mean* = sum(S_c*) / sum(n_c*)`` over a resample of clusters ``c*`` with replacement, where ``S_c``
    and ``n_c`` are the sum and count of cluster ``c``.
    """
    arr = np.asarray(values, dtype=float)
    if arr.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), 0)
    if clusters is not None and len(clusters) != len(arr):
        raise ValueError(f"clusters has {len(clusters)} entries but values has {len(arr)}")
    sums, counts = _cluster_means(arr, clusters)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(sums), size=(n_boot, len(sums)))
    boot = sums[draws].sum(axis=1) / counts[draws].sum(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return Estimate(float(arr.mean()), float(low), float(high), int(arr.size))


def paired_difference(
    treatment: Sequence[float],
    control: Sequence[float],
    clusters: Sequence[Hashable] | None = None,
    **kwargs: object,
) -> Estimate:
    """Mean paired difference ``treatment - control`` (same tasks, same order) with a cluster bootstrap."""
    t = np.asarray(treatment, dtype=float)
    c = np.asarray(control, dtype=float)
    if t.shape != c.shape:
        raise ValueError(f"paired arrays differ in length: {t.shape} vs {c.shape}")
    return cluster_bootstrap(t - c, clusters, **kwargs)  # type: ignore[arg-type]


def split_interaction(
    treatment: Sequence[float],
    control: Sequence[float],
    in_split: Sequence[bool],
    *,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> Estimate:
    """Split × method interaction: ``Δ(split) - Δ(rest)`` with a stratified task bootstrap."""
    d = np.asarray(treatment, dtype=float) - np.asarray(control, dtype=float)
    mask = np.asarray(in_split, dtype=bool)
    a, b = d[mask], d[~mask]
    if a.size == 0 or b.size == 0:
        return Estimate(float("nan"), float("nan"), float("nan"), int(d.size))
    rng = np.random.default_rng(seed)
    boot = rng.choice(a, size=(n_boot, a.size)).mean(axis=1) - rng.choice(b, size=(n_boot, b.size)).mean(
        axis=1
    )
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(boot, [alpha, 1.0 - alpha])
    return Estimate(float(a.mean() - b.mean()), float(low), float(high), int(d.size))


def count_harm(group: dict[str, int], *, swaps: int, base_success: bool, success: bool) -> None:
    """Add one episode to a harm group (``episodes``, ``swaps``, ``harmed``, ``helped``), judged
    against its paired baseline episode (same task, same policy seed): harmed when the baseline
    succeeded and this episode did not, helped the other way round."""
    group["episodes"] = group.get("episodes", 0) + 1
    group["swaps"] = group.get("swaps", 0) + swaps
    group["harmed"] = group.get("harmed", 0) + int(base_success and not success)
    group["helped"] = group.get("helped", 0) + int(success and not base_success)


def harm_rates(groups: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """The groups by name (sorted), each with ``harm_rate`` and ``help_rate`` = harmed / episodes and
    helped / episodes, rounded to 3 places."""
    out: dict[str, dict[str, float]] = {k: dict(v) for k, v in sorted(groups.items())}
    for v in out.values():
        v["harm_rate"] = round(v["harmed"] / v["episodes"], 3)
        v["help_rate"] = round(v["helped"] / v["episodes"], 3)
    return out
