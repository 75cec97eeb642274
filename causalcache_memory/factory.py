"""The one path from :class:`~causalcache_memory.config.CausalCacheConfig` to objects.

The CLI, the LangGraph integration and the evaluation harness all build their archive, allocator and
controller here; allocators come from their registry (:mod:`causalcache_memory.allocation.registry`).
The policy (the VLM) is passed in already built: runtimes live in the runtime layer, which the core never
imports, so callers build one from ``config.policy`` with
``causalcache_memory.runtime.registry.build_policy`` (or bring their own :class:`Policy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.config.models import ArchiveConfig, CausalCacheConfig
from causalcache_memory.controller import MemoryController
from causalcache_memory.decisions.stats import DecisionMonitor
from causalcache_memory.render.prompt import RenderOptions

if TYPE_CHECKING:
    from causalcache_memory.allocation.base import Allocator
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = ["build_archive", "build_controller", "render_options"]


def build_archive(config: ArchiveConfig) -> ScreenshotArchive:
    """Open the archive named by ``config.url`` (a local directory or an fsspec URL)."""
    from causalcache_memory.archive import open_archive

    return open_archive(
        config.url,
        max_pixels=config.max_pixels,
        formats=tuple(config.formats),
        cache_dir=config.cache_dir,
        timeout_s=config.timeout_s,
    )


def render_options(config: CausalCacheConfig) -> RenderOptions:
    r = config.render
    return RenderOptions(
        system_prompt=r.system_prompt,
        history_header=r.history_header,
        retained_header=r.retained_header,
        current_header=r.current_header,
        request=r.request,
        dedupe_current_screen=r.dedupe_current_screen,
        layout=r.layout,
    )


def build_controller(
    config: CausalCacheConfig,
    *,
    policy: Policy | None = None,
    archive: ScreenshotArchive | None = None,
    allocator: Allocator | None = None,
    **overrides: Any,
) -> MemoryController:
    """A :class:`MemoryController` around ``policy`` from config; ``archive``/``allocator`` objects override it.

    ``policy`` is the built VLM (``causalcache_memory.runtime.registry.build_policy(config.policy)``
    builds the configured runtime), or None when each ``decide`` passes its own (a memory's controller). The controller's :class:`DecisionMonitor` follows
    ``config.allocation.idle_warning`` unless ``monitor=`` is given (one monitor per memory).
    """
    if overrides.get("monitor") is None:
        overrides["monitor"] = DecisionMonitor.from_config(
            config.allocation.idle_warning, ocr_engine=config.archive.ocr.engine
        )
    return MemoryController(
        policy=policy,
        archive=archive if archive is not None else build_archive(config.archive),
        allocator=allocator if allocator is not None else build_allocator(config.allocation),
        budget=config.budget,
        two_pass=config.two_pass,
        render_options=render_options(config),
        selector_timeout_s=config.allocation.selector.timeout_ms / 1000.0,
        **overrides,
    )
