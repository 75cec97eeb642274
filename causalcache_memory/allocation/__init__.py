"""Exact-B fidelity allocation: the contract, the baseline policies and the policy registry."""

from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    AllocationPolicy,
    check_budget,
    exact_b_size,
    make_allocation,
    recent_b,
)
from causalcache_memory.allocation.rgb import RGBSimilarityPolicy
from causalcache_memory.allocation.simple import RandomPolicy, RecentPolicy, SummaryOnlyPolicy

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
