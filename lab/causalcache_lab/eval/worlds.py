"""Closed-loop results across worlds: a row per world and an aggregate per world split.

With ``ClosedLoopSettings.worlds`` the closed loop runs tasks from several worlds of the family
(:mod:`~causalcache_lab.world.family`). On top of the all-task summary this adds

* ``world_rows``: per world, its split, its knobs and the full summary of its tasks
  (:func:`~causalcache_lab.eval.summary.summarize`: success, paired Δ vs Recent-B with the
  task-bootstrap interval, helped / harmed, pass-2 fire and OOD rates per task split);
* ``world_splits``: per world split (``train``, ``dev``, ``heldout``, ``v2``), the same summary over all
  tasks of the split's worlds, task-paired (a task's score is its mean over policy seeds).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_lab.eval.summary import summarize

if TYPE_CHECKING:
    from causalcache_lab.eval.world_agent import EpisodeOutcome

__all__ = ["WORLD_SPLIT_ORDER", "summarize_worlds"]

WORLD_SPLIT_ORDER = ("heldout", "devmix", "devtype", "devshift", "devage", "dev", "train", "v2")
_KNOBS = ("vocab", "layout", "skin", "wording", "after_read", "before_read", "decoys", "platform")


def summarize_worlds(
    outcomes: Sequence[EpisodeOutcome], arms: Sequence[str], *, ni_margin: float = 0.05, seed: int = 0
) -> dict[str, Any]:
    """``world_rows`` and ``world_splits`` (see the module docstring)."""
    from causalcache_lab.world.family import world_spec

    worlds = list(dict.fromkeys(o.world for o in outcomes))
    rows: dict[str, Any] = {}
    by_split: dict[str, list[str]] = {}
    for world in worlds:
        spec = world_spec(world)
        by_split.setdefault(spec.split, []).append(world)
        mine = [o for o in outcomes if o.world == world]
        rows[world] = {
            "split": spec.split,
            "knobs": {k: getattr(spec, k) for k in _KNOBS},
            **summarize(mine, arms, seed=seed, ni_margin=ni_margin),
        }
    splits: dict[str, Any] = {}
    for split in sorted(by_split, key=WORLD_SPLIT_ORDER.index):
        members = set(by_split[split])
        mine = [o for o in outcomes if o.world in members]
        splits[split] = {"worlds": by_split[split], **summarize(mine, arms, seed=seed, ni_margin=ni_margin)}
    return {"world_rows": rows, "world_splits": splits}
