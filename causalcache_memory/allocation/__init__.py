"""Exact-B fidelity allocation: the contract, the baseline policies and the policy registry."""

from .base import (
    Allocation,
    AllocationContext,
    AllocationPolicy,
    check_budget,
    exact_b_size,
    make_allocation,
    recent_b,
)
from .rgb import RGBSimilarityPolicy
from .simple import RandomPolicy, RecentPolicy, SummaryOnlyPolicy

__all__ = [
    "Allocation",
    "AllocationContext",
    "AllocationPolicy",
    "RGBSimilarityPolicy",
    "RandomPolicy",
    "RecentPolicy",
    "SummaryOnlyPolicy",
    "check_budget",
    "exact_b_size",
    "make_allocation",
    "recent_b",
]
