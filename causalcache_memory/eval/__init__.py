"""Evaluation: bootstrap statistics, the closed-loop harness, reports."""

from .stats import Estimate, cluster_bootstrap, paired_difference, split_interaction

__all__ = ["Estimate", "cluster_bootstrap", "paired_difference", "split_interaction"]
