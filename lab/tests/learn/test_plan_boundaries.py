"""``learn``'s plan gates on boundary counts (issue 52): exactly at, one below and one above each limit.

``check_plan`` refuses a split with fewer states than training needs; ``fold_test_into_dev`` gives the test
split to dev only when dev alone is short, training has its states, and dev + test states reach dev's
need. Every count below is chosen against those rules by hand.
"""

from __future__ import annotations

import pytest

from causalcache_lab.learn.plan import InsufficientDataError, LabelPlan, check_plan, fold_test_into_dev

NEED_TRAIN, NEED_DEV = 90, 20
FRACTIONS = (0.7, 0.15, 0.15)


def _plan(train: int, dev: int, test: int) -> LabelPlan:
    return LabelPlan({"train": 70, "dev": 15, "test": 15}, {"train": train, "dev": dev, "test": test}, 3.0)


def _fold(train: int, dev: int, test: int, fractions=FRACTIONS):  # type: ignore[no-untyped-def]
    return fold_test_into_dev(_plan(train, dev, test), fractions, NEED_TRAIN, NEED_DEV)


@pytest.mark.parametrize(("dev", "test"), [(15, 5), (19, 1), (0, 20), (10, 10), (15, 6), (19, 30)])
def test_fold_counts_dev_and_test_states_together_against_devs_need(dev, test) -> None:
    # dev + test >= 20 while test alone may be far below 20: the fold must count both splits
    assert _fold(NEED_TRAIN, dev, test) == (0.7, 0.3, 0.0)


@pytest.mark.parametrize(("dev", "test"), [(15, 4), (19, 0), (0, 19), (10, 9)])
def test_fold_refuses_when_dev_and_test_states_stay_one_short_of_devs_need(dev, test) -> None:
    assert _fold(NEED_TRAIN, dev, test) is None


def test_a_short_dev_split_made_up_only_by_dev_plus_test_is_folded_not_refused() -> None:
    # the refusal's hint and the fold agree: 15 dev + 5 test = 20 states reach dev's need exactly
    plan = _plan(NEED_TRAIN, 15, 5)
    assert fold_test_into_dev(plan, FRACTIONS, NEED_TRAIN, NEED_DEV) == (0.7, 0.3, 0.0)
    with pytest.raises(InsufficientDataError, match=r"give the test split to dev .*about 20 dev states"):
        check_plan(plan, FRACTIONS, total=100, need_train=NEED_TRAIN, need_dev=NEED_DEV)


@pytest.mark.parametrize(
    ("train", "folds"), [(NEED_TRAIN - 1, False), (NEED_TRAIN, True), (NEED_TRAIN + 1, True)]
)
def test_fold_needs_training_to_have_its_states(train, folds) -> None:
    assert (_fold(train, 15, 10) is not None) is folds


@pytest.mark.parametrize(("dev", "folds"), [(NEED_DEV - 1, True), (NEED_DEV, False), (NEED_DEV + 1, False)])
def test_fold_only_when_dev_alone_is_short(dev, folds) -> None:
    assert (_fold(NEED_TRAIN, dev, 10) is not None) is folds


def test_fold_needs_a_test_split_to_give() -> None:
    assert _fold(NEED_TRAIN, 15, 10, (0.7, 0.3, 0.0)) is None
    assert _fold(NEED_TRAIN, 15, 10, (0.8, 0.1, 0.1)) == (0.8, 0.2, 0.0)


@pytest.mark.parametrize(
    ("train", "dev", "refused"),
    [
        (NEED_TRAIN, NEED_DEV, False),  # exactly at both limits
        (NEED_TRAIN + 1, NEED_DEV + 1, False),
        (NEED_TRAIN - 1, NEED_DEV, True),  # one below train's
        (NEED_TRAIN, NEED_DEV - 1, True),  # one below dev's
    ],
)
def test_check_plan_refuses_exactly_below_each_limit(train, dev, refused) -> None:
    plan = _plan(train, dev, 0)
    if refused:
        with pytest.raises(InsufficientDataError):
            check_plan(plan, FRACTIONS, total=100, need_train=NEED_TRAIN, need_dev=NEED_DEV)
    else:
        check_plan(plan, FRACTIONS, total=100, need_train=NEED_TRAIN, need_dev=NEED_DEV)


def test_check_plan_names_each_short_split_with_its_counts() -> None:
    with pytest.raises(InsufficientDataError) as err:
        check_plan(_plan(NEED_TRAIN - 1, NEED_DEV - 1, 0), FRACTIONS, total=100, need_train=90, need_dev=20)
    text = str(err.value)
    assert "needs 90 training states" in text and "the plan has 89" in text
    assert "needs 20 dev states, the plan has 19" in text
    # the data's own rates: ceil(100 * 90 / 89) = 102 for train, ceil(100 * 20 / 19) = 106 for dev
    assert "about 106 trajectories" in text
