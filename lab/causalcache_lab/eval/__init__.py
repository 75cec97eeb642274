"""Evaluation: bootstrap statistics, the closed-loop harness, reports."""

from causalcache_lab.eval.plots import plot_budget_curve, plot_split_bars
from causalcache_lab.eval.report import format_table, write_report
from causalcache_lab.eval.stats import (
    Estimate,
    cluster_bootstrap,
    paired_difference,
    split_interaction,
)

__all__ = [
    "Estimate",
    "cluster_bootstrap",
    "format_table",
    "paired_difference",
    "plot_budget_curve",
    "plot_split_bars",
    "split_interaction",
    "write_report",
]
