"""Build archives, policies and controllers from :class:`~causalcache_memory.config.CausalCacheConfig`.

Heavy runtimes are imported only when chosen; a missing dependency raises an error naming the extra.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from causalcache_memory.allocation.registry import build_allocation_policy
from causalcache_memory.config.models import ArchiveConfig, CausalCacheConfig, PolicyConfig
from causalcache_memory.controller import MemoryController
from causalcache_memory.errors import ConfigError
from causalcache_memory.render.prompt import RenderOptions

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy

__all__ = ["build_archive", "build_controller", "build_policy", "render_options"]


def build_archive(config: ArchiveConfig) -> ScreenshotArchive:
    """Open the archive named by ``config.url`` (a local directory or an fsspec URL)."""
    from causalcache_memory.archive import open_archive

    return open_archive(config.url, max_pixels=config.max_pixels, formats=tuple(config.formats))


def build_policy(config: PolicyConfig) -> Policy:
    """Instantiate the policy runtime selected by ``config.kind``."""
    kind = config.kind
    if kind == "simulated":
        module = importlib.import_module("causalcache_memory.lab.world.sim_policy")
        return module.SimulatedPolicy(seed=config.simulated.seed)
    if kind == "transformers":
        cfg = config.transformers
        assert cfg is not None
        module = importlib.import_module("causalcache_memory.runtime.transformers_policy")
        return module.TransformersPolicy.from_pretrained(
            cfg.model_path,
            device=cfg.device,
            dtype=None if cfg.dtype == "auto" else cfg.dtype,
            max_new_tokens=cfg.max_new_tokens,
            platform=config.platform,
            adapter=cfg.adapter_path,
        )
    if kind == "sglang":
        cfg_s = config.sglang
        assert cfg_s is not None
        module = importlib.import_module("causalcache_memory.runtime.sglang_client")
        return module.SGLangPolicy(
            list(cfg_s.urls),
            timeout_s=cfg_s.timeout_s,
            max_retries=cfg_s.max_retries,
            max_new_tokens=cfg_s.max_new_tokens,
            max_images_per_prompt=cfg_s.max_images_per_prompt,
            platform=config.platform,
        )
    if kind == "openai":
        cfg_o = config.openai
        assert cfg_o is not None
        module = importlib.import_module("causalcache_memory.runtime.openai_client")
        return module.OpenAIPolicy(
            cfg_o.base_url,
            cfg_o.model,
            api_key=os.environ.get(cfg_o.api_key_env),
            timeout_s=cfg_o.timeout_s,
            max_retries=cfg_o.max_retries,
            max_tokens=cfg_o.max_tokens,
            max_images_per_prompt=cfg_o.max_images_per_prompt,
            platform=config.platform,
        )
    raise ConfigError(f"policy.kind={kind!r} is not supported")  # pragma: no cover - guarded by the model


def render_options(config: CausalCacheConfig) -> RenderOptions:
    r = config.render
    return RenderOptions(
        system_prompt=r.system_prompt,
        history_header=r.history_header,
        retained_header=r.retained_header,
        current_header=r.current_header,
        request=r.request,
    )


def build_controller(
    config: CausalCacheConfig,
    *,
    policy: Policy | None = None,
    archive: ScreenshotArchive | None = None,
    **overrides: Any,
) -> MemoryController:
    """A :class:`MemoryController` from config; ``policy``/``archive`` objects override the config's."""
    return MemoryController(
        policy=policy if policy is not None else build_policy(config.policy),
        archive=archive if archive is not None else build_archive(config.archive),
        allocation_policy=overrides.pop("allocation_policy", None)
        or build_allocation_policy(config.allocation),
        budget=config.budget,
        two_pass=config.two_pass,
        render_options=render_options(config),
        selector_timeout_s=config.allocation.selector.timeout_ms / 1000.0,
        **overrides,
    )
