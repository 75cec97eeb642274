"""Allocators registered by name and built from :class:`~causalcache_memory.config.AllocationConfig`.

Every registered name is valid for ``allocation.allocator`` in YAML (the config validates against this
registry). Third-party allocators register with :func:`register_allocator`; an unknown name raises an
error listing the registered ones. The learned selector and RGB similarity load lazily (they pull in
onnxruntime / archive thumbnails only when chosen).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from causalcache_memory.allocation.base import Allocator
from causalcache_memory.allocation.positional import EvenlySpacedAllocator, FirstBAllocator
from causalcache_memory.allocation.simple import RandomAllocator, RecentAllocator, SummaryOnlyAllocator
from causalcache_memory.errors import AllocationError

if TYPE_CHECKING:
    from causalcache_memory.config.models import AllocationConfig

__all__ = ["available_allocators", "build_allocator", "check_allocator_name", "register_allocator"]

Factory = Callable[["AllocationConfig"], Allocator]


def _learned(cfg: AllocationConfig) -> Allocator:
    module = importlib.import_module("causalcache_memory.selector.allocator")
    sel = cfg.selector
    if sel is None:
        return module.LearnedSelectorAllocator()
    return module.LearnedSelectorAllocator(
        model_path=sel.model_path,
        beam_width=sel.beam_width,
        inverted=sel.inverted,
        min_gain=sel.min_gain,
        ood_guard=sel.ood_guard,
        ood_scale=sel.ood_scale,
    )


def _rgb(cfg: AllocationConfig) -> Allocator:
    module = importlib.import_module("causalcache_memory.allocation.rgb")
    return module.RGBSimilarityAllocator(size=cfg.rgb_size)


_REGISTRY: dict[str, Factory] = {
    "recent": lambda cfg: RecentAllocator(),
    "summary_only": lambda cfg: SummaryOnlyAllocator(),
    "random": lambda cfg: RandomAllocator(seed=cfg.seed),
    "first": lambda cfg: FirstBAllocator(),
    "evenly_spaced": lambda cfg: EvenlySpacedAllocator(),
    "rgb": _rgb,
    "causalcache": _learned,
}


def register_allocator(name: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Register ``factory(config) -> Allocator`` under ``name`` (then valid in YAML)."""
    if not name or not name.replace("_", "").isalnum():
        raise AllocationError(f"allocator name {name!r} must be a non-empty identifier")
    if name in _REGISTRY and not overwrite:
        raise AllocationError(f"allocator {name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[name] = factory


def available_allocators() -> list[str]:
    return sorted(_REGISTRY)


def check_allocator_name(name: object) -> str:
    """``name`` if it is registered, else an :class:`AllocationError` listing the registered names."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise AllocationError(
            f"allocation.allocator={name!r} is not a registered allocator; registered: "
            f"{', '.join(available_allocators())} (register your own with register_allocator)"
        )
    return name


@dataclass(frozen=True)
class _DefaultOptions:
    """Options used when an allocator is built from a bare name (the config models' defaults)."""

    allocator: str
    seed: int = 0
    rgb_size: int = 32
    selector: None = None


def build_allocator(config: AllocationConfig | str) -> Allocator:
    """Build the allocator named by ``config.allocator`` (or a bare name with default options)."""
    cfg = _DefaultOptions(config) if isinstance(config, str) else config
    return _REGISTRY[check_allocator_name(cfg.allocator)](cfg)  # type: ignore[arg-type]

