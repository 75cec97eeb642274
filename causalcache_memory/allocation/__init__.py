"""Exact-B fidelity allocation: the contract, the baseline allocators and the allocator registry."""

from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    Allocator,
    check_budget,
    exact_b_size,
    make_allocation,
    recent_b,
)
from causalcache_memory.allocation.mean_b import MeanBAllocator
from causalcache_memory.allocation.positional import EvenlySpacedAllocator, FirstBAllocator
from causalcache_memory.allocation.priced import PrefixPricer, PricedAllocator
from causalcache_memory.allocation.rgb import RGBSimilarityAllocator
from causalcache_memory.allocation.simple import (
    RandomAllocator,
    RecentAllocator,
    RecentBatchAllocator,
    SummaryOnlyAllocator,
)

__all__ = [
    "Allocation",
    "AllocationContext",
    "Allocator",
    "EvenlySpacedAllocator",
    "FirstBAllocator",
    "MeanBAllocator",
    "PrefixPricer",
    "PricedAllocator",
    "RGBSimilarityAllocator",
    "RandomAllocator",
    "RecentAllocator",
    "RecentBatchAllocator",
    "SummaryOnlyAllocator",
    "check_budget",
    "exact_b_size",
    "make_allocation",
    "recent_b",
]
