"""The refusal's trajectory estimate: always more than the data at hand when a split is short."""

from __future__ import annotations

import re

import pytest

from causalcache_lab.learn.plan import InsufficientDataError, LabelPlan, check_plan


def _needed(plan: LabelPlan, total: int) -> int:
    with pytest.raises(InsufficientDataError) as err:
        check_plan(plan, (0.7, 0.15, 0.15), total=total, need_train=90, need_dev=20)
    found = re.search(r"needs about (\d+) trajectories \(have (\d+)", str(err.value))
    assert found is not None, str(err.value)
    assert int(found.group(2)) == total
    return int(found.group(1))


def test_a_short_dev_split_asks_for_more_trajectories_than_recorded() -> None:
    # heldout-02, 200 explored episodes: 105 trajectories, 3.2 states each, but the hash split drew
    # 14 dev trajectories holding 15 states (the per-trajectory average alone estimated 42)
    plan = LabelPlan({"train": 73, "dev": 14, "test": 18}, {"train": 290, "dev": 15, "test": 31}, 3.2)
    needed = _needed(plan, 105)
    assert needed > 105
    assert needed == -(-105 * 20 // 15)  # the data's own rate: 15 dev states per 105 trajectories


def test_an_empty_split_uses_the_average_states_per_trajectory() -> None:
    plan = LabelPlan({"train": 8, "dev": 0, "test": 2}, {"train": 20, "dev": 0, "test": 4}, 2.4)
    assert _needed(plan, 10) == max(-(-90 * 10 // 20), -(-20 // (2.4 * 0.15)))


def test_an_empty_split_asks_for_more_trajectories_than_recorded_even_where_the_average_says_fewer() -> None:
    # 10 trajectories of 40 states, none drawn into dev: the average alone (40 x 0.15 = 6 dev states a
    # trajectory) says ceil(20 / 6) = 4, but the 10 at hand gave none: at least one more is needed
    plan = LabelPlan({"train": 10, "dev": 0, "test": 0}, {"train": 400, "dev": 0, "test": 0}, 40.0)
    assert _needed(plan, 10) == 11
    train_empty = LabelPlan({"train": 0, "dev": 6, "test": 4}, {"train": 0, "dev": 240, "test": 160}, 40.0)
    assert _needed(train_empty, 10) == 11  # 90 / (40 x 0.7) says 4


def test_a_short_dev_split_also_names_the_test_to_dev_way_out_when_it_would_suffice() -> None:
    plan = LabelPlan({"train": 73, "dev": 14, "test": 18}, {"train": 290, "dev": 15, "test": 31}, 3.2)
    with pytest.raises(InsufficientDataError, match=r"splits: \[0\.7, 0\.3, 0\.0\]\}: about 46 dev states"):
        check_plan(plan, (0.7, 0.15, 0.15), total=105, need_train=90, need_dev=20)


@pytest.mark.parametrize(
    ("states", "fractions"),
    [
        ({"train": 290, "dev": 5, "test": 10}, (0.7, 0.15, 0.15)),  # dev + test still short of 20
        ({"train": 50, "dev": 15, "test": 31}, (0.7, 0.15, 0.15)),  # train is short too
        ({"train": 290, "dev": 15, "test": 0}, (0.7, 0.3, 0.0)),  # no test split to give
    ],
)
def test_no_test_to_dev_hint_where_it_would_not_help(states, fractions) -> None:
    plan = LabelPlan({"train": 73, "dev": 14, "test": 18}, states, 3.2)
    with pytest.raises(InsufficientDataError) as err:
        check_plan(plan, fractions, total=105, need_train=90, need_dev=20)
    assert "give the test split to dev" not in str(err.value)
