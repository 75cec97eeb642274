"""LangGraph drop-in memory: ``CausalCacheMemory(budget=4)`` for ``StateGraph`` and ``create_agent``.

Importing this package does not import langgraph; constructing :class:`CausalCacheMemory` does (a missing
install raises :class:`~causalcache_memory.errors.MissingDependencyError` naming the ``langgraph`` extra).
"""

from causalcache_memory.integrations.langgraph.context import CausalCacheContext
from causalcache_memory.integrations.langgraph.images import (
    find_image_data,
    find_screenshot_refs,
    screenshot_ref,
    strip_images,
)
from causalcache_memory.integrations.langgraph.memory import STEP_EVENT, CausalCacheMemory
from causalcache_memory.integrations.langgraph.policies import (
    ChatModelPolicy,
    generation_from_message,
    parse_message_action,
)
from causalcache_memory.integrations.langgraph.state import STATE_KEYS, CausalCacheState

__all__ = [
    "STATE_KEYS",
    "STEP_EVENT",
    "CausalCacheContext",
    "CausalCacheMemory",
    "CausalCacheState",
    "ChatModelPolicy",
    "find_image_data",
    "find_screenshot_refs",
    "generation_from_message",
    "parse_message_action",
    "screenshot_ref",
    "strip_images",
]
