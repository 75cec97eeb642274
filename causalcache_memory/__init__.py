"""causalcache-memory: budgeted fidelity restoration for long-horizon GUI agents.

Every past step stays in the prompt as a one-line summary; a budget of ``B`` steps is additionally shown
at high fidelity (verbatim response + archived screenshot). A learned selector decides which.

Importing this package loads no torch, transformers, langgraph or onnxruntime.
"""

from causalcache_memory.actions import Action
from causalcache_memory.allocation import (
    Allocation,
    AllocationContext,
    AllocationPolicy,
    RandomPolicy,
    RecentPolicy,
    SummaryOnlyPolicy,
    make_allocation,
    recent_b,
)
from causalcache_memory.archive import GCReport, LocalArchive, ScreenshotArchive, open_archive
from causalcache_memory.errors import CausalCacheError, CausalCacheWarning, ConfigError
from causalcache_memory.policy import Generation, Policy
from causalcache_memory.render import BoundPrompt, RenderedPrompt, RenderOptions, render_prompt
from causalcache_memory.trace import Event, Trace

__version__ = "0.1.0"

__all__ = [
    "Action",
    "Allocation",
    "AllocationContext",
    "AllocationPolicy",
    "BoundPrompt",
    "CausalCacheError",
    "CausalCacheWarning",
    "ConfigError",
    "Event",
    "GCReport",
    "Generation",
    "LocalArchive",
    "Policy",
    "RandomPolicy",
    "RecentPolicy",
    "RenderOptions",
    "RenderedPrompt",
    "ScreenshotArchive",
    "SummaryOnlyPolicy",
    "Trace",
    "__version__",
    "make_allocation",
    "open_archive",
    "recent_b",
    "render_prompt",
]
