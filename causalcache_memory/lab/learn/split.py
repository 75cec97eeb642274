"""The one trajectory split the learn pipeline plans, labels and trains with.

``trajectory_split`` is the split function shared by mining, labelling and training (issue 25); until the
data layer's own ``trajectory_split`` lands it calls the selector trainer's hash split, so the plan of
``causalcache learn`` (which trajectories end on dev, and so whether calibration is possible) is exactly
the split :func:`~causalcache_memory.lab.selector.train.train_selector` will use. Swapping the backend is
the one import below.
"""

from __future__ import annotations

from collections.abc import Sequence

from causalcache_memory.lab.selector.examples import split_of as _backend

__all__ = ["trajectory_split"]


def trajectory_split(trajectory_id: str, seed: int, fractions: Sequence[float]) -> str:
    """``train`` / ``dev`` / ``test`` of ``trajectory_id`` (stable: a hash of the id and ``seed``)."""
    return _backend(trajectory_id, seed, fractions)
