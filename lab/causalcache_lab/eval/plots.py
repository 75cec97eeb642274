"""Plots of closed-loop results: success per split with 95% intervals, and success along the budget axis.

Both functions read the ``results.json`` dictionary written by the closed-loop runner, write a PNG and
return its path, or return ``None`` when the data they need is absent. matplotlib is imported on use
(extra ``plots``) and drawn through its object API on the Agg canvas: no display, no global pyplot state.

The split bars follow the layout of the paper's core-contrast figure (one group per split, one bar per
arm); the budget curve follows its budget-sweep figure (success against ``B``, full set and the
memory-critical subset side by side).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from causalcache_memory._optional import require

__all__ = [
    "ARM_LABELS",
    "ARM_ORDER",
    "SPLITS",
    "SPLIT_LABELS",
    "arm_label",
    "ordered_arms",
    "plot_budget_curve",
    "plot_split_bars",
]

#: Splits of the closed-loop results, in display order.
SPLITS: tuple[str, ...] = ("all", "memory_critical", "control")
SPLIT_LABELS: dict[str, str] = {
    "all": "All tasks",
    "memory_critical": "Memory-critical",
    "control": "Control",
}
#: Arms in display order (weakest reference first, the learned allocation last).
ARM_ORDER: tuple[str, ...] = (
    "summary_only",
    "recent",
    "random",
    "first",
    "evenly_spaced",
    "rgb",
    "oracle",
    "causalcache",
)
ARM_LABELS: dict[str, str] = {
    "summary_only": "Summary-only (B=0)",
    "recent": "Recent-B",
    "random": "Random",
    "first": "First-B",
    "evenly_spaced": "Evenly spaced",
    "rgb": "RGB similarity",
    "oracle": "Evidence oracle",
    "causalcache": "CausalCache",
}
_ARM_COLORS: dict[str, str] = {
    "summary_only": "#9e9e9e",
    "recent": "#1e88e5",
    "random": "#8e24aa",
    "rgb": "#43a047",
    "first": "#6d4c41",
    "evenly_spaced": "#00897b",
    "oracle": "#212121",
    "causalcache": "#fb8c00",
}
_FALLBACK_COLORS = ("#6d4c41", "#00897b", "#c0ca33", "#5e35b1", "#d81b60")


def arm_label(arm: str, budget: int | None = None) -> str:
    """Human name of an arm; ``recent`` shows the budget (``Recent-4``) when it is known."""
    if arm in ("recent", "first") and budget is not None:
        return f"{'Recent' if arm == 'recent' else 'First'}-{budget}"
    return ARM_LABELS.get(arm, arm)


def ordered_arms(results: Mapping[str, Any]) -> list[str]:
    """Arms present in ``results["arms"]``: in ``meta.arms`` order, then known order, then the rest."""
    arms = results.get("arms")
    if not isinstance(arms, Mapping):
        return []
    meta = results.get("meta") if isinstance(results.get("meta"), Mapping) else {}
    preferred = [a for a in (meta.get("arms") or []) if isinstance(a, str)]
    order = [*preferred, *ARM_ORDER, *arms]
    return [a for a in dict.fromkeys(order) if a in arms]


def _budget(results: Mapping[str, Any]) -> int | None:
    meta = results.get("meta")
    budget = meta.get("budget") if isinstance(meta, Mapping) else None
    return budget if isinstance(budget, int) and not isinstance(budget, bool) else None


def _number(value: object) -> float | None:
    """A finite float, or None for missing/NaN/non-numeric values."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def _color(arm: str, i: int) -> str:
    return _ARM_COLORS.get(arm, _FALLBACK_COLORS[i % len(_FALLBACK_COLORS)])


def _figure(width: float, height: float, ncols: int = 1) -> tuple[Any, Any]:
    require("matplotlib", purpose="plotting closed-loop results")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, axes


def _save(fig: Any, path: str | Path) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png")
    return out


def _split_cell(results: Mapping[str, Any], arm: str, split: str) -> tuple[float, float, float] | None:
    """``(success, err_low, err_high)`` of one arm and split, or None when absent."""
    cell = results["arms"][arm].get(split) if isinstance(results["arms"][arm], Mapping) else None
    if not isinstance(cell, Mapping):
        return None
    success = _number(cell.get("success"))
    if success is None:
        return None
    ci = cell.get("ci95")
    lo = hi = None
    if isinstance(ci, Sequence) and len(ci) == 2:
        lo, hi = _number(ci[0]), _number(ci[1])
    err_lo = max(0.0, success - lo) if lo is not None else 0.0
    err_hi = max(0.0, hi - success) if hi is not None else 0.0
    return success, err_lo, err_hi


def plot_split_bars(results: Mapping[str, Any], path: str | Path) -> Path | None:
    """Grouped bars of task success per split (all / memory-critical / control) for every arm.

    Error bars are the task-paired bootstrap 95% intervals ``ci95`` of each cell. Returns the PNG path,
    or None when no arm has a success value for any split.
    """
    arms = ordered_arms(results)
    cells = {(a, s): _split_cell(results, a, s) for a in arms for s in SPLITS}
    splits = [s for s in SPLITS if any(cells[(a, s)] is not None for a in arms)]
    if not splits:
        return None
    budget = _budget(results)
    fig, (ax,) = _figure(3.2 + 2.0 * len(splits), 3.6)
    width = 0.8 / len(arms)
    for i, arm in enumerate(arms):
        xs, ys, lows, highs = [], [], [], []
        for j, split in enumerate(splits):
            cell = cells[(arm, split)]
            if cell is None:
                continue
            xs.append(j - 0.4 + width * (i + 0.5))
            ys.append(cell[0])
            lows.append(cell[1])
            highs.append(cell[2])
        if not xs:
            continue
        ax.bar(xs, ys, width * 0.92, color=_color(arm, i), label=arm_label(arm, budget))
        ax.errorbar(xs, ys, yerr=[lows, highs], fmt="none", ecolor="#212121", capsize=3, linewidth=1)
    ax.set_xticks(range(len(splits)), [SPLIT_LABELS[s] for s in splits])
    ax.set_ylabel("Task success")
    ax.set_ylim(0.0, 1.05)
    title = "Closed-loop success per split" + (f" (B={budget})" if budget is not None else "")
    ax.set_title(title + ", 95% CI")
    ax.grid(axis="y", alpha=0.3)
    fig.legend(fontsize="small", loc="outside right upper")
    return _save(fig, path)


def _curve(values: object, n: int) -> list[float | None] | None:
    if not isinstance(values, Sequence) or isinstance(values, str) or len(values) != n:
        return None
    return [_number(v) for v in values]


def plot_budget_curve(results: Mapping[str, Any], path: str | Path) -> Path | None:
    """Task success against the budget ``B`` for every arm: full set (left) and memory-critical (right).

    Reads ``results["budget_curve"] = {"budgets": [...], "arms": {arm: {"all": [...],
    "memory_critical": [...]}}}``; a series whose length differs from ``budgets`` is skipped. Returns
    the PNG path, or None when the budget curve is absent or has no usable series.
    """
    curve = results.get("budget_curve")
    if not isinstance(curve, Mapping) or not isinstance(curve.get("arms"), Mapping):
        return None
    budgets = [_number(b) for b in curve.get("budgets") or []]
    if not budgets or any(b is None for b in budgets):
        return None
    panels = ("all", "memory_critical")
    series = {
        (arm, split): _curve(data.get(split), len(budgets))
        for arm, data in curve["arms"].items()
        if isinstance(data, Mapping)
        for split in panels
    }
    if all(v is None for v in series.values()):
        return None
    arms = [a for a in dict.fromkeys([*ordered_arms(results), *curve["arms"]]) if a in curve["arms"]]
    fig, axes = _figure(10.0, 3.6, ncols=2)
    for ax, split in zip(axes, panels, strict=True):
        for i, arm in enumerate(arms):
            ys = series.get((arm, split))
            if ys is None:
                continue
            pts = [(b, y) for b, y in zip(budgets, ys, strict=True) if y is not None]
            ax.plot(
                [p[0] for p in pts],
                [p[1] for p in pts],
                marker="o",
                color=_color(arm, i),
                label=arm_label(arm),
            )
        ax.set_xscale("symlog", linthresh=1.0)
        ax.set_xticks(budgets, [f"{b:g}" for b in budgets])
        ax.set_xlabel("Budget B (history images)")
        ax.set_ylim(0.0, 1.05)
        ax.set_title(SPLIT_LABELS[split])
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("Task success")
    handles, labels = axes[0].get_legend_handles_labels()
    if not handles:
        handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, fontsize="small", loc="outside right upper")
    fig.suptitle("Closed-loop success along the budget axis")
    return _save(fig, path)
