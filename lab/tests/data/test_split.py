"""The one trajectory split: ``data mine`` and ``train selector`` (``split_by: hash``) put every
trajectory in the same split (issue 25: they used different hash functions, so a trajectory could be
adapter training data and selector test data)."""

from __future__ import annotations

import numpy as np
import pytest
from test_mining import CODES_A, _traj

from causalcache_lab.data.split import trajectory_split
from causalcache_lab.hgkv.groups import mine_groups

#: one state per trajectory: below the training minimums on purpose (only the split is compared)
SMOKE = {"min_train_states": 2, "min_dev_states": 1}


def _example(trajectory_id: str):
    from causalcache_lab.selector.examples import StateExample

    empty = np.zeros(0)
    return StateExample(
        trajectory_id, 8, 1, np.zeros((7, 3)), np.zeros((1, 2)), [], empty, empty, empty, empty
    )


def test_mining_and_selector_training_split_alike() -> None:
    pytest.importorskip("torch")
    from causalcache_lab.selector.train import TrainConfig, _split

    ids = [f"task-{k}" for k in range(60)]
    groups, _ = mine_groups([_traj(i, CODES_A) for i in ids], budgets=(1,), dev=0.2, test=0.25, salt="s1")
    mined = {g.trajectory_id: g.split for g in groups}
    assert set(mined) == set(ids) and set(mined.values()) == {"train", "dev", "test"}
    parts = _split(
        [_example(i) for i in ids], TrainConfig(splits=(0.55, 0.2, 0.25), split_salt="s1", **SMOKE)
    )
    trained = {ex.trajectory_id: name for name, part in parts.items() for ex in part}
    assert trained == mined


def test_split_is_stable_trajectory_level_and_checked() -> None:
    from causalcache_memory.errors import ConfigError

    ids = [f"t{i}" for i in range(400)]
    first = [trajectory_split(i) for i in ids]
    assert first == [trajectory_split(i) for i in reversed(ids)][::-1]  # order and company do not matter
    assert 0.6 < first.count("train") / 400 < 0.8 and first.count("dev") > 30 and first.count("test") > 30
    assert [trajectory_split(i, salt="x") for i in ids] != first
    with pytest.raises(ConfigError, match=r"dev=0\.6, test=0\.5"):
        trajectory_split("a", dev=0.6, test=0.5)
