"""Policy runtimes (the VLM side) registered by name; built from :class:`~causalcache_memory.config.PolicyConfig`.

Every registered name is valid for ``policy.kind`` in YAML. Built-in runtimes are listed here by import
path (``"module:function"``) and imported only when chosen, so the run-time core never imports a runtime,
the synthetic world or their heavy dependencies. A builder takes the validated :class:`PolicyConfig` and
returns a :class:`~causalcache_memory.policy.Policy`. Register your own with :func:`register_runtime`;
its options go under ``policy.options``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Union

from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.policy import Policy

__all__ = ["available_runtimes", "build_runtime", "check_runtime_name", "register_runtime"]

Builder = Callable[["PolicyConfig"], "Policy"]

_REGISTRY: dict[str, Union[str, Builder]] = {  # noqa: UP007 - a string forward reference
    "transformers": "causalcache_memory.runtime.transformers_policy:policy_from_config",
    "sglang": "causalcache_memory.runtime.sglang_client:policy_from_config",
    "openai": "causalcache_memory.runtime.openai_client:policy_from_config",
    # the synthetic world's CPU stand-in for a VLM: only when a config names it (the demo does)
    "simulated": "causalcache_memory.lab.world.sim_policy:policy_from_config",
}


def register_runtime(name: str, builder: Builder | str, *, overwrite: bool = False) -> None:
    """Register ``builder(policy_config) -> Policy`` (or its ``"module:function"`` path) under ``name``."""
    if not name or not name.replace("_", "").isalnum():
        raise ConfigError(f"runtime name {name!r} must be a non-empty identifier")
    if name in _REGISTRY and not overwrite:
        raise ConfigError(f"runtime {name!r} is already registered; pass overwrite=True to replace it")
    _REGISTRY[name] = builder


def available_runtimes() -> list[str]:
    return sorted(_REGISTRY)


def check_runtime_name(name: object) -> str:
    """``name`` if registered, else a :class:`ConfigError` listing the registered runtimes."""
    if not isinstance(name, str) or name not in _REGISTRY:
        raise ConfigError(
            f"policy.kind={name!r} is not a registered runtime; registered: {', '.join(available_runtimes())} "
            "(register your own with causalcache_memory.runtimes.register_runtime)"
        )
    return name


def _resolve(entry: str | Builder) -> Builder:
    if not isinstance(entry, str):
        return entry
    module, _, attr = entry.partition(":")
    return getattr(importlib.import_module(module), attr)


def build_runtime(config: PolicyConfig) -> Policy:
    """Instantiate the runtime named by ``config.kind``; a config naming none is refused."""
    if config.kind is None:
        raise ConfigError(
            "policy.kind is not set: name the policy runtime that serves the VLM "
            f"(one of {', '.join(available_runtimes())}), or pass a Policy object"
        )
    return _resolve(_REGISTRY[check_runtime_name(config.kind)])(config)
