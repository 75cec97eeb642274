"""Policy runtimes (the VLM side) registered by name; built from :class:`~causalcache_memory.config.PolicyConfig`.

Every registered name is valid for ``policy.kind`` in YAML. The registry (:data:`RUNTIMES`, a
:class:`~causalcache_memory.registry.Registry`) lives in the runtime layer, so the run-time core never
names a runtime: :func:`causalcache_memory.factory.build_controller` takes a built policy, and the CLI,
the LangGraph integration and the lab build it here with :func:`build_policy`. A builder takes the
validated :class:`PolicyConfig` and returns a :class:`~causalcache_memory.policy.Policy`; the built-in
ones import their module (and its heavy dependencies) only when called. Register your own with
:func:`register_runtime`; its options go under ``policy.options``. Installed distributions add runtimes
through the entry-point group ``causalcache.runtimes``: the lab registers the synthetic world's
``simulated`` runtime there, so ``policy.kind: simulated`` builds once the lab is installed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from causalcache_memory.errors import ConfigError
from causalcache_memory.registry import Registry

if TYPE_CHECKING:
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.policy import Policy

__all__ = ["RUNTIMES", "available_runtimes", "build_policy", "lookup_runtime", "register_runtime"]

Builder = Callable[["PolicyConfig"], "Policy"]


def _transformers(config: PolicyConfig) -> Policy:
    from causalcache_memory.runtime.transformers_policy import policy_from_config

    return policy_from_config(config)


def _sglang(config: PolicyConfig) -> Policy:
    from causalcache_memory.runtime.sglang_client import policy_from_config

    return policy_from_config(config)


def _openai(config: PolicyConfig) -> Policy:
    from causalcache_memory.runtime.openai_client import policy_from_config

    return policy_from_config(config)


#: the runtime registry (``policy.kind``)
RUNTIMES: Registry[Builder] = Registry(
    "runtime",
    field="policy.kind",
    register_with="causalcache_memory.runtime.registry.register_runtime",
    error=ConfigError,
    hint="the synthetic world's `simulated` runtime comes with the lab (`pip install -e ./lab`)",
    entry_point_group="causalcache.runtimes",
)
RUNTIMES.register("transformers", _transformers)
RUNTIMES.register("sglang", _sglang)
RUNTIMES.register("openai", _openai)


def register_runtime(name: str, builder: Builder, *, overwrite: bool = False) -> None:
    """Register ``builder(policy_config) -> Policy`` under ``name`` (then valid for ``policy.kind``)."""
    RUNTIMES.register(name, builder, overwrite=overwrite)


def available_runtimes() -> list[str]:
    return RUNTIMES.available()


def lookup_runtime(name: object) -> Builder:
    """The builder registered as ``name``, else a :class:`ConfigError` listing the registered runtimes."""
    return RUNTIMES.lookup(name)


def build_policy(config: PolicyConfig) -> Policy:
    """Instantiate the runtime named by ``config.kind``; a config naming none is refused."""
    if config.kind is None:
        raise ConfigError(
            "policy.kind is not set: name the policy runtime that serves the VLM "
            f"(one of {', '.join(available_runtimes())}), or pass a Policy object"
        )
    return lookup_runtime(config.kind)(config)
