"""The lab's policy runtimes, registered with the library through the ``causalcache.runtimes`` entry
point group (``lab/pyproject.toml``), so ``policy.kind: simulated`` builds wherever the lab is installed."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.policy import Policy

__all__ = ["simulated"]


def simulated(config: PolicyConfig) -> Policy:
    """The synthetic world's simulated policy (a CPU stand-in for a VLM) from ``policy.options``."""
    from causalcache_lab.world.sim_policy import policy_from_config

    return policy_from_config(config)
