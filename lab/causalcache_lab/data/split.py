"""The one train/dev/test split of trajectories, shared by mining, labelling and training.

``data mine`` (replacement groups), ``data stats`` and ``train selector`` (``train.split_by: hash``)
all call :func:`trajectory_split`, so a trajectory is never adapter training data in one and selector
test data in the other. The split is trajectory-disjoint (every state of a trajectory falls in its
split) and stable (a function of the id, the fractions and the salt only; adding trajectories never
moves others):

    u = int(sha256(salt + trajectory_id)[:8 bytes]) / 2**64
    split = "test" if u < test, "dev" if u < test + dev, else "train"
"""

from __future__ import annotations

import hashlib
from typing import Literal

from causalcache_memory.errors import ConfigError

__all__ = ["Split", "trajectory_split"]

Split = Literal["train", "dev", "test"]


def trajectory_split(trajectory_id: str, *, dev: float = 0.15, test: float = 0.15, salt: str = "") -> Split:
    """``"train"``, ``"dev"`` or ``"test"`` for ``trajectory_id`` (formula in the module docstring)."""
    if not (0 <= dev and 0 <= test and dev + test < 1):
        raise ConfigError(
            f"split fractions dev={dev}, test={test} must be >= 0 and sum below 1 (the rest is train)"
        )
    u = int.from_bytes(hashlib.sha256(f"{salt}{trajectory_id}".encode()).digest()[:8], "big") / 2.0**64
    if u < test:
        return "test"
    if u < test + dev:
        return "dev"
    return "train"
