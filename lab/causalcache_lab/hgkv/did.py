"""The per-arm-anchored difference-in-differences (DiD) objective, its statistics and selection gates.

Paper, "Per-B Fidelity-Restoration Supervision". With ``l^on``/``l^off`` the mean target log-likelihood
with the adapter active / bypassed, each arm is anchored to its own frozen score::

    A_s = l^on(relevant) - l^off(relevant),  A_r = l^on(recent) - l^off(recent),
    A_n = l^on(wrong)    - l^off(wrong)

    L = [m - (A_s - A_r)]+ + [m - A_s]+ + [m - (A_s - A_n)]+
        + lam_cap ([|A_r| - eps]+ + [|A_n| - eps]+) + lam ||ΔW||^2

with ``m = 0.01``, ``eps = 0.02``, ``lam_cap = 2``, ``lam = 1e-4`` and no action cross-entropy. Hinges
are taken per group, averaged within each budget ``B`` and then over budgets (stratified by ``B``).

Selection gates (pre-specified, dev groups only), per ``B``: DiD select ``mean(A_s - A_r) > 0`` with a
positive bootstrap lower bound, and ``mean |A_r| < eps``, ``mean |A_n| < eps``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    import torch

__all__ = ["DiDHyper", "DiDStats", "Interval", "bootstrap", "did_loss", "did_stats", "passes_gates"]


@dataclass(frozen=True)
class DiDHyper:
    """Objective constants (paper values by default)."""

    margin: float = 0.01
    eps: float = 0.02
    lam_cap: float = 2.0
    lam: float = 1e-4


def did_loss(
    a_s: torch.Tensor,
    a_r: torch.Tensor,
    a_n: torch.Tensor,
    budgets: Sequence[int],
    l2: torch.Tensor,
    hyper: DiDHyper = DiDHyper(),
) -> torch.Tensor:
    """Scalar DiD loss. ``a_s, a_r, a_n``: ``(groups,)`` increments; ``budgets[g]`` is group g's ``B``."""
    import torch

    relu = torch.relu
    m, eps = hyper.margin, hyper.eps
    per_group = (
        relu(m - (a_s - a_r))
        + relu(m - a_s)
        + relu(m - (a_s - a_n))
        + hyper.lam_cap * (relu(a_r.abs() - eps) + relu(a_n.abs() - eps))
    )
    b = torch.as_tensor(list(budgets), device=per_group.device)
    strata = [per_group[b == value].mean() for value in sorted(set(int(v) for v in budgets))]
    return torch.stack(strata).mean() + hyper.lam * l2


@dataclass(frozen=True)
class Interval:
    """Mean and percentile bootstrap interval."""

    mean: float
    lo: float
    hi: float

    def __str__(self) -> str:
        return f"{self.mean:+.4f} [{self.lo:+.4f}, {self.hi:+.4f}]"


def bootstrap(values: Sequence[float], *, reps: int = 1000, level: float = 0.95, seed: int = 0) -> Interval:
    """Mean of ``values`` with a percentile bootstrap interval over groups (seeded, deterministic)."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return Interval(float("nan"), float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(reps, x.size))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    return Interval(float(x.mean()), float(np.quantile(means, tail)), float(np.quantile(means, 1 - tail)))


@dataclass(frozen=True)
class DiDStats:
    """Per-``B`` evaluation of one adapter (the paper's DiD table row).

    Attributes:
        budget: ``B``.
        groups: number of groups.
        did_select: ``A_s - A_r``.
        abs_recent: ``|A_r|`` (recent-window drift).
        wrong_drift: ``|A_n|`` (wrong-history drift).
        did_wrong: ``A_s - A_n``.
        frozen_probe: the frozen policy's own selectivity ``l^off(relevant) - l^off(recent)``.
    """

    budget: int
    groups: int
    did_select: Interval
    abs_recent: Interval
    wrong_drift: Interval
    did_wrong: Interval
    frozen_probe: Interval

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"budget": self.budget, "groups": self.groups}
        for name in ("did_select", "abs_recent", "wrong_drift", "did_wrong", "frozen_probe"):
            iv = getattr(self, name)
            out[name] = {"mean": iv.mean, "lo": iv.lo, "hi": iv.hi}
        return out


def did_stats(
    on: np.ndarray, off: np.ndarray, budgets: Sequence[int], *, reps: int = 1000, seed: int = 0
) -> dict[int, DiDStats]:
    """Stats per ``B`` from ``(groups, 3)`` on/off scores in arm order (recent, relevant, wrong)."""
    inc = np.asarray(on, dtype=np.float64) - np.asarray(off, dtype=np.float64)
    off = np.asarray(off, dtype=np.float64)
    b = np.asarray(budgets)
    out: dict[int, DiDStats] = {}
    for value in sorted(set(int(v) for v in budgets)):
        sel = b == value
        a_r, a_s, a_n = inc[sel, 0], inc[sel, 1], inc[sel, 2]
        out[value] = DiDStats(
            budget=value,
            groups=int(sel.sum()),
            did_select=bootstrap(a_s - a_r, reps=reps, seed=seed),
            abs_recent=bootstrap(np.abs(a_r), reps=reps, seed=seed),
            wrong_drift=bootstrap(np.abs(a_n), reps=reps, seed=seed),
            did_wrong=bootstrap(a_s - a_n, reps=reps, seed=seed),
            frozen_probe=bootstrap(off[sel, 1] - off[sel, 0], reps=reps, seed=seed),
        )
    return out


def passes_gates(stats: Mapping[int, DiDStats], eps: float = DiDHyper.eps) -> bool:
    """True when every ``B`` passes: DiD select > 0 with lower bound > 0, mean |A_r|, |A_n| < eps."""
    return bool(stats) and all(
        s.did_select.mean > 0 and s.did_select.lo > 0 and s.abs_recent.mean < eps and s.wrong_drift.mean < eps
        for s in stats.values()
    )
