"""Allocation policies registered by name, built from :class:`~causalcache_memory.config.AllocationConfig`.

Third-party policies register with :func:`register_allocation_policy`; the learned selector and RGB
similarity load lazily (they pull in onnxruntime / the archive thumbnails only when chosen).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from causalcache_memory.allocation.base import AllocationPolicy
from causalcache_memory.allocation.simple import RandomPolicy, RecentPolicy, SummaryOnlyPolicy
from causalcache_memory.errors import AllocationError

if TYPE_CHECKING:
    from causalcache_memory.config.models import AllocationConfig

__all__ = ["available_allocation_policies", "build_allocation_policy", "register_allocation_policy"]

Factory = Callable[["AllocationConfig"], AllocationPolicy]


def _learned(cfg: AllocationConfig) -> AllocationPolicy:
    module = importlib.import_module("causalcache_memory.selector.allocator")
    sel = cfg.selector
    return module.LearnedSelectorPolicy(
        model_path=sel.model_path, beam_width=sel.beam_width, inverted=sel.inverted, min_gain=sel.min_gain
    )


def _rgb(cfg: AllocationConfig) -> AllocationPolicy:
    module = importlib.import_module("causalcache_memory.allocation.rgb")
    return module.RGBSimilarityPolicy(size=cfg.rgb_size)


_REGISTRY: dict[str, Factory] = {
    "recent": lambda cfg: RecentPolicy(),
    "summary_only": lambda cfg: SummaryOnlyPolicy(),
    "random": lambda cfg: RandomPolicy(seed=cfg.seed),
    "rgb": _rgb,
    "causalcache": _learned,
}


def register_allocation_policy(name: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Register ``factory(config) -> AllocationPolicy`` under ``name``."""
    if not name or not name.replace("_", "").isalnum():
        raise AllocationError(f"allocation policy name {name!r} must be a non-empty identifier")
    if name in _REGISTRY and not overwrite:
        raise AllocationError(
            f"allocation policy {name!r} is already registered; pass overwrite=True to replace it"
        )
    _REGISTRY[name] = factory


def available_allocation_policies() -> list[str]:
    return sorted(_REGISTRY)


def build_allocation_policy(config: AllocationConfig | str) -> AllocationPolicy:
    """Build the policy named by ``config.policy`` (or a bare name with default options)."""
    from causalcache_memory.config.models import AllocationConfig

    if isinstance(config, str):
        name, cfg = config, AllocationConfig()
    else:
        name, cfg = config.policy, config
    factory = _REGISTRY.get(name)
    if factory is None:
        raise AllocationError(
            f"allocation.policy={name!r} is not registered; available: {', '.join(available_allocation_policies())}"
        )
    return factory(cfg)
