"""What you run to train and evaluate: never imported by the run-time core.

* :mod:`.world` -- the synthetic cross-app GUI world and its simulated policy (the demo's closed loop);
* :mod:`.data` -- trajectory records and dataset loaders;
* :mod:`.selector` -- selector labels, training, ONNX export, the allocation ladder;
* :mod:`.hgkv` -- replacement groups, DiD statistics and HGKV adapter training;
* :mod:`.eval` -- the closed-loop harness, bootstrap statistics and reports;
* :mod:`.bench` -- per-step overhead benchmarks (``causalcache bench``).

The run-time core (trace, archive, allocation, render, controller, selector inference, config) imports
none of these; ``tests/architecture/test_layers.py`` enforces it.

Importing this package registers the lab's runtime, ``simulated`` (the synthetic world's CPU stand-in for
a VLM, :func:`causalcache_memory.lab.world.sim_policy.policy_from_config`), in the runtime registry, so a
config with ``policy.kind: simulated`` builds once the lab is imported (the demo, the closed-loop harness
and the benchmarks import it); the core and the runtime layer hold no reference to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causalcache_memory.runtime.registry import RUNTIMES

if TYPE_CHECKING:
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.policy import Policy


def _simulated(config: PolicyConfig) -> Policy:
    from causalcache_memory.lab.world.sim_policy import policy_from_config

    return policy_from_config(config)


if "simulated" not in RUNTIMES:
    RUNTIMES.register("simulated", _simulated)
