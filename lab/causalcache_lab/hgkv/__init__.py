"""HGKV training: replacement groups, DiD statistics and adapter training (the adapter itself is
:mod:`causalcache_memory.runtime.hgkv`; its names are re-exported here for convenience).

Torch is imported only when a torch-backed name (the adapter, training) is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from causalcache_lab.hgkv.did import (
    DiDHyper,
    DiDStats,
    Interval,
    bootstrap,
    did_loss,
    did_stats,
    passes_gates,
)
from causalcache_lab.hgkv.groups import (
    ARMS,
    MiningReport,
    ReplacementGroup,
    assign_split,
    load_groups,
    mine_groups,
    save_groups,
)

_LAZY = {
    "HGKVAdapter": "causalcache_memory.runtime.hgkv.adapter",
    "HGKVConfig": "causalcache_memory.runtime.hgkv.adapter",
    "HistoryGatedLinear": "causalcache_memory.runtime.hgkv.layer",
    "GroupScorer": ".train",
    "TrainConfig": ".train",
    "TrainResult": ".train",
    "build_history_gate": "causalcache_memory.runtime.hgkv.gate",
    "resolve_adapter": "causalcache_memory.runtime.hgkv.adapter",
    "evaluate": ".train",
    "train_did": ".train",
}

__all__ = [
    "ARMS",
    "DiDHyper",
    "DiDStats",
    "GroupScorer",
    "HGKVAdapter",
    "HGKVConfig",
    "HistoryGatedLinear",
    "Interval",
    "MiningReport",
    "ReplacementGroup",
    "TrainConfig",
    "TrainResult",
    "assign_split",
    "bootstrap",
    "build_history_gate",
    "did_loss",
    "did_stats",
    "evaluate",
    "load_groups",
    "mine_groups",
    "passes_gates",
    "resolve_adapter",
    "save_groups",
    "train_did",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(
            import_module(_LAZY[name] if _LAZY[name].startswith("causalcache") else __name__ + _LAZY[name]),
            name,
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
