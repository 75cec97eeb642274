"""The history-gated K/V adapter at run time: gate, gated layer, adapter, safetensors I/O.

Torch is imported only when a name is first used. Training lives in :mod:`causalcache_lab.hgkv`.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_LAZY = {
    "HGKVAdapter": "causalcache_memory.runtime.hgkv.adapter",
    "HGKVConfig": "causalcache_memory.runtime.hgkv.config",
    "HistoryGatedLinear": "causalcache_memory.runtime.hgkv.layer",
    "GateState": "causalcache_memory.runtime.hgkv.layer",
    "build_history_gate": "causalcache_memory.runtime.hgkv.gate",
    "resolve_adapter": "causalcache_memory.runtime.hgkv.adapter",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
