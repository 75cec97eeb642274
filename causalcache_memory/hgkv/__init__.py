"""HGKV: the history-gated K/V adapter, replacement groups and DiD training.

Torch is imported only when a torch-backed name (the adapter, training) is first used.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .did import DiDHyper, DiDStats, Interval, bootstrap, did_loss, did_stats, passes_gates
from .groups import ARMS, MiningReport, ReplacementGroup, assign_split, load_groups, mine_groups, save_groups

_LAZY = {
    "HGKVAdapter": ".adapter",
    "HGKVConfig": ".adapter",
    "HistoryGatedLinear": ".layer",
    "GroupScorer": ".train",
    "TrainConfig": ".train",
    "TrainResult": ".train",
    "build_history_gate": ".gate",
    "resolve_adapter": ".adapter",
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
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
