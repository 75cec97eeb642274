"""Allocators registered by name and built from :class:`~causalcache_memory.config.AllocationConfig`.

Every registered name is valid for ``allocation.allocator`` in YAML (the config validates against this
registry, :data:`ALLOCATORS`, a :class:`~causalcache_memory.registry.Registry`). Third-party allocators
register with :func:`register_allocator`; an unknown name raises an error listing the registered ones.
The learned selector (``selector``) and RGB similarity (``rgb``) load lazily (they pull in onnxruntime /
archive thumbnails only when chosen).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from causalcache_memory.allocation.base import Allocator
from causalcache_memory.allocation.explore import ExploringAllocator
from causalcache_memory.allocation.positional import EvenlySpacedAllocator, FirstBAllocator
from causalcache_memory.allocation.simple import (
    RandomAllocator,
    RecentAllocator,
    RecentBatchAllocator,
    SummaryOnlyAllocator,
)
from causalcache_memory.errors import AllocationError
from causalcache_memory.registry import Registry

if TYPE_CHECKING:
    from causalcache_memory.config.models import AllocationConfig

__all__ = [
    "ALLOCATORS",
    "COMPARED_SELECTOR",
    "available_allocators",
    "build_allocator",
    "lookup_allocator",
    "register_allocator",
]

Factory = Callable[["AllocationConfig"], Allocator]


def _selector(cfg: AllocationConfig) -> Allocator:
    module = importlib.import_module("causalcache_memory.selector.allocator")
    sel = cfg.selector
    if sel is None:
        return module.SelectorAllocator()
    return module.SelectorAllocator(
        model_path=sel.model_path,
        beam_width=sel.beam_width,
        inverted=sel.inverted,
        min_gain=sel.min_gain,
        second_pass_share=sel.second_pass_share,
        share_window=sel.share_window,
        ood_guard=sel.ood_guard,
        ood_scale=sel.ood_scale,
        ood_refit=sel.ood_refit,
        ood_refit_warmup=sel.ood_refit_warmup,
        witness_check=sel.witness_check,
    )


def _rgb(cfg: AllocationConfig) -> Allocator:
    module = importlib.import_module("causalcache_memory.allocation.rgb")
    return module.RGBSimilarityAllocator(size=cfg.rgb_size)


#: the allocator registry (``allocation.allocator``)
ALLOCATORS: Registry[Factory] = Registry(
    "allocator",
    field="allocation.allocator",
    register_with="causalcache_memory.allocation.registry.register_allocator",
    error=AllocationError,
    renamed={"causalcache": "selector"},
)
ALLOCATORS.register("recent", lambda cfg: RecentAllocator())
ALLOCATORS.register("recent_batch", lambda cfg: RecentBatchAllocator(chunk=cfg.batch_chunk))
ALLOCATORS.register("summary_only", lambda cfg: SummaryOnlyAllocator())
ALLOCATORS.register("random", lambda cfg: RandomAllocator(seed=cfg.seed))
ALLOCATORS.register("first", lambda cfg: FirstBAllocator())
ALLOCATORS.register("evenly_spaced", lambda cfg: EvenlySpacedAllocator())
ALLOCATORS.register("rgb", _rgb)
ALLOCATORS.register("selector", _selector)


def register_allocator(name: str, factory: Factory, *, overwrite: bool = False) -> None:
    """Register ``factory(config) -> Allocator`` under ``name`` (then valid in YAML)."""
    ALLOCATORS.register(name, factory, overwrite=overwrite)


def available_allocators() -> list[str]:
    return ALLOCATORS.available()


def lookup_allocator(name: object) -> Factory:
    """The factory registered as ``name``, else an :class:`AllocationError` listing the registered names."""
    return ALLOCATORS.lookup(name)


@dataclass(frozen=True)
class _DefaultOptions:
    """Options used when an allocator is built from a bare name (the config models' defaults)."""

    allocator: str
    seed: int = 0
    rgb_size: int = 32
    batch_chunk: int = 2
    priced: None = None
    mean_b: None = None
    selector: None = None
    explore: None = None
    compare: None = None


#: the decision records' ``allocator`` on the episodes ``allocation.compare`` sends to the compared selector
COMPARED_SELECTOR = "selector_compared"


def _pricer(priced: Any) -> Any:
    """The :class:`PrefixPricer` of ``allocation.priced`` (its image rule and cache model)."""
    from causalcache_memory.allocation.priced import PrefixPricer
    from causalcache_memory.prompt_cost import cache_model_from_dict, hosted_cache_model, hosted_image_rule

    cache = priced.cache
    model = hosted_cache_model(cache) if isinstance(cache, str) else cache_model_from_dict(cache)
    # the layout is the render config's (render.layout); the controller tells the allocator (use_layout)
    return PrefixPricer(image_rule=hosted_image_rule(priced.image_model), cache=model)


def _priced(allocator: Allocator, cfg: AllocationConfig) -> Allocator:
    """``allocator`` wrapped in the priced decision of ``cfg.priced`` (None: unchanged), or with
    ``cfg.mean_b`` in the mean-B contract (its swaps priced when ``cfg.priced`` is set)."""
    priced = getattr(cfg, "priced", None)
    mean_b = getattr(cfg, "mean_b", None)
    if mean_b is not None:
        from causalcache_memory.allocation.mean_b import MeanBAllocator

        if priced is None:
            return MeanBAllocator(allocator, chunk=mean_b.chunk)
        return MeanBAllocator(
            allocator,
            chunk=mean_b.chunk,
            pricer=_pricer(priced),
            exchange_rate=priced.exchange_rate,
            recent_value=priced.recent_value,
        )
    if priced is None:
        return allocator
    from causalcache_memory.allocation.priced import PricedAllocator

    return PricedAllocator(
        allocator,
        _pricer(priced),
        exchange_rate=priced.exchange_rate,
        recent_value=priced.recent_value,
        hold_steps=priced.hold_steps,
        slide_every=priced.slide_every,
    )


def build_allocator(config: AllocationConfig | str) -> Allocator:
    """Build the allocator named by ``config.allocator`` (or a bare name with default options).

    With ``config.explore`` set, the result is an :class:`~causalcache_memory.allocation.explore.ExploringAllocator`
    running that allocator on most episodes and ``explore.allocator`` (seeded by ``explore.seed``) on a
    stable ``explore.share`` of them. With ``config.compare`` set, the same wrapper runs the selector with
    ``compare.model_path`` on a stable ``compare.share`` of episodes, named :data:`COMPARED_SELECTOR` in
    their decision records, and with ``compare.shadow`` the other selector's set on every record.
    """
    cfg = _DefaultOptions(config) if isinstance(config, str) else config
    allocator = _priced(lookup_allocator(cfg.allocator)(cfg), cfg)  # type: ignore[arg-type]
    compare = getattr(cfg, "compare", None)
    if getattr(cfg, "mean_b", None) is not None and (compare is not None or getattr(cfg, "explore", None)):
        raise AllocationError(
            "allocation.mean_b cannot be combined with allocation.explore or allocation.compare (their other "
            "arm runs under exact-B); remove one of them"
        )
    if compare is not None:  # the same selector options, another model, on a share of episodes
        selector = cfg.selector.model_copy(update={"model_path": compare.model_path})  # type: ignore[union-attr]
        own = cfg.model_copy(update={"selector": selector, "compare": None})  # type: ignore[union-attr]
        compared = lookup_allocator("selector")(own)
        compared.name = COMPARED_SELECTOR
        return ExploringAllocator(
            allocator,
            compared,
            share=compare.share,
            seed=compare.seed,
            shadow=compare.shadow,
            shadow_limit_s=cfg.selector.timeout_ms / 1000.0,  # type: ignore[union-attr] # the controller's limit
        )
    explore = getattr(cfg, "explore", None)
    if explore is None:
        return allocator
    own = cfg.model_copy(update={"allocator": explore.allocator, "seed": explore.seed, "explore": None})  # type: ignore[union-attr]
    explorer = lookup_allocator(explore.allocator)(own)
    return ExploringAllocator(allocator, explorer, share=explore.share, seed=explore.seed)
