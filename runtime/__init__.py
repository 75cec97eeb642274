"""Policy runtimes (installed as ``causalcache_memory.runtime``): transformers, SGLang, OpenAI-compatible.

The runtime registry (``policy.kind`` names) is :mod:`.registry`: ``build_policy(config.policy)``.

Nothing heavy is imported here: names resolve lazily, so ``from causalcache_memory.runtime import
SGLangPolicy`` needs only httpx, and ``TransformersPolicy`` imports torch/transformers on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "ChatFormat": "chat_format",
    "QWEN_VL": "chat_format",
    "OpenAIPolicy": "openai_client",
    "PromptLogprobsUnsupportedError": "openai_client",
    "SGLangPolicy": "sglang_client",
    "TransformersPolicy": "transformers_policy",
    "available_runtimes": "registry",
    "build_policy": "registry",
    "build_tiny_qwen_vl": "tiny",
    "register_runtime": "registry",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'causalcache_memory.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
