"""Serving the HGKV adapter with SGLang 0.5.23: an out-of-tree model and processor package.

Pieces (only :mod:`.models` and :mod:`.processors` import ``sglang``; everything else runs in plain torch
on CPU against small fakes of SGLang's objects):

* :mod:`.roles`: per-image roles in ``mm_processor_kwargs`` and in each image's radix-cache key;
* :mod:`.adapter`: the HGKV adapter directory, checked against the served model;
* :mod:`.gating`: history rows of an extend pass and the in-place K/V update on the fused ``qkv_proj``;
* :mod:`.plugin`: the model and processor mixins; :mod:`.models` / :mod:`.processors`: the classes SGLang
  registers (``SGLANG_EXTERNAL_MODEL_PACKAGE`` / ``SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE``);
* :mod:`.selfcheck`: the launcher's proof that the plugin is active; :mod:`.sglang_names`: every SGLang
  name relied on (the drift guard reads the pinned wheel for them).

``causalcache serve`` sets the environment and runs the self-check; see docs/RUNTIMES.md.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

SGLANG_VERSION = "0.5.23"
MODEL_PACKAGE = "causalcache_memory.runtime.sglang_server.models"
PROCESSOR_PACKAGE = "causalcache_memory.runtime.sglang_server.processors"

_LAZY = {
    "ModelShape": "causalcache_memory.runtime.sglang_server.adapter",
    "ServerHGKV": "causalcache_memory.runtime.sglang_server.gating",
    "history_rows": "causalcache_memory.runtime.sglang_server.gating",
    "load_server_adapter": "causalcache_memory.runtime.sglang_server.adapter",
    "self_check": "causalcache_memory.runtime.sglang_server.selfcheck",
}

__all__ = sorted([*_LAZY, "MODEL_PACKAGE", "PROCESSOR_PACKAGE", "SGLANG_VERSION"])


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
