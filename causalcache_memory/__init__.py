"""causalcache-memory: budgeted fidelity restoration for long-horizon GUI agents.

Every past step stays in the prompt as a one-line summary; a budget of ``B`` steps is additionally shown
at high fidelity (verbatim response + archived screenshot). A learned selector decides which.

Importing this package loads no torch, transformers, langgraph or onnxruntime.
``CausalCacheMemory`` (the LangGraph drop-in) resolves lazily, on first use.
"""

from typing import Any

from causalcache_memory.actions import Action
from causalcache_memory.allocation import (
    Allocation,
    AllocationContext,
    Allocator,
    RandomAllocator,
    RecentAllocator,
    SummaryOnlyAllocator,
    make_allocation,
    recent_b,
)
from causalcache_memory.archive import GCReport, LocalArchive, ScreenshotArchive, open_archive
from causalcache_memory.errors import CausalCacheError, CausalCacheWarning, ConfigError
from causalcache_memory.policy import Generation, Policy
from causalcache_memory.render import BoundPrompt, RenderedPrompt, RenderOptions, render_prompt
from causalcache_memory.trace import Event, Trace

__version__ = "0.1.0"

_LAZY = {"CausalCacheMemory": "causalcache_memory.integrations.langgraph"}

__all__ = [
    "Action",
    "Allocation",
    "AllocationContext",
    "Allocator",
    "BoundPrompt",
    "CausalCacheError",
    "CausalCacheMemory",
    "CausalCacheWarning",
    "ConfigError",
    "Event",
    "GCReport",
    "Generation",
    "LocalArchive",
    "Policy",
    "RandomAllocator",
    "RecentAllocator",
    "RenderOptions",
    "RenderedPrompt",
    "ScreenshotArchive",
    "SummaryOnlyAllocator",
    "Trace",
    "make_allocation",
    "open_archive",
    "recent_b",
    "render_prompt",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
