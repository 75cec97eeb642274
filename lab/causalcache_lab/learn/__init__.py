"""``causalcache learn``: train the selector on a team's own recorded agent (docs/LEARN.md)."""

from causalcache_lab.learn.config import SOURCES, LearnConfig, load_learn_config
from causalcache_lab.learn.pipeline import STAGES, run_learn
from causalcache_lab.learn.plan import InsufficientDataError
from causalcache_lab.learn.threads import load_success_labels, threads_to_trajectories

__all__ = [
    "SOURCES",
    "STAGES",
    "InsufficientDataError",
    "LearnConfig",
    "load_learn_config",
    "load_success_labels",
    "run_learn",
    "threads_to_trajectories",
]
