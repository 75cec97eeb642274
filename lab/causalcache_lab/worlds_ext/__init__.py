"""External-style screen generators for leave-one-generator-out evaluation (issue 54; docs/GENERATORS.md).

Three structurally different generators (``desktop``, ``web``, ``mobile``: their own screen grammars,
densities of 5 to ~300 text elements a screen, and screen text in a real format each), simulated
policies whose reading rules differ from the world family's labeller, and a harness that runs the
allocators on one generator x policy pair. Nothing here is shared with ``lab/world`` but the action
model and the memory's public API.
"""

from causalcache_lab.worlds_ext.generators import GENERATORS, generator
from causalcache_lab.worlds_ext.tasks import ExtTask, generate_ext_tasks, parse_goal

__all__ = ["GENERATORS", "ExtTask", "generate_ext_tasks", "generator", "parse_goal"]
