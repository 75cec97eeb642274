"""causalcache-memory: budgeted fidelity restoration for long-horizon GUI agents.

Every past step stays in the prompt as a one-line summary; a budget of ``B`` steps is additionally shown
at high fidelity (verbatim response + archived screenshot). A learned selector decides which.

Importing this package loads no torch, transformers, langgraph or onnxruntime.
"""

from .actions import Action
from .allocation import (
    Allocation,
    AllocationContext,
    AllocationPolicy,
    RandomPolicy,
    RecentPolicy,
    SummaryOnlyPolicy,
    make_allocation,
    recent_b,
)
from .archive import GCReport, LocalArchive, ScreenshotArchive, open_archive
from .errors import CausalCacheError, CausalCacheWarning, ConfigError
from .policy import Generation, Policy
from .render import BoundPrompt, RenderedPrompt, RenderOptions, render_prompt
from .trace import Event, Trace

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
