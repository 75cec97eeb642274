"""The swap threshold (``selector/threshold.py``) on small hand-made frontiers and windows (issue 52).

Each expected value follows from the module docstring's rules by hand: the frontier point of largest gain
within the pass-2 share (ties to the lower fire rate); on the deployment, with ``n`` recent top gains and
``m = floor(b n)``, ``τ = max(d_(n-m), 0)`` (1-based order statistic; ``+inf`` when ``m = 0``), so that at
most ``m`` of them exceed it.
"""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest

from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.threshold import (
    DEFAULT_SECOND_PASS_SHARE,
    DEFAULT_SHARE_WINDOW,
    WINDOW_WARMUP,
    DeploymentThreshold,
    Thresholds,
    check_share,
    check_window,
    choose_threshold,
    resolve_min_gain,
    resolve_thresholds,
)

# (threshold, fire rate, gain): the pooled dev frontier of a model
FRONTIER = [[0.9, 0.0, 0.0], [0.5, 0.1, 0.02], [0.3, 0.15, 0.05], [0.1, 0.3, 0.05], [0.0, 0.6, 0.08]]


def test_constants_are_the_documented_defaults() -> None:
    assert (DEFAULT_SECOND_PASS_SHARE, DEFAULT_SHARE_WINDOW, WINDOW_WARMUP) == (0.15, 200, 20)


@pytest.mark.parametrize("budget", [0.0, 0.5, 1.0, 1, 0])
def test_check_share_accepts_shares_in_the_closed_unit_interval(budget) -> None:
    assert check_share(budget) == float(budget) and isinstance(check_share(budget), float)


@pytest.mark.parametrize("bad", [-0.01, 1.01, True, "0.1", None, float("nan")])
def test_check_share_refuses_anything_else_naming_the_field(bad) -> None:
    with pytest.raises(SelectorError, match=rf"my_field={bad!r} must be a share of decisions in \[0, 1\]"):
        check_share(bad, field="my_field")


@pytest.mark.parametrize(
    ("budget", "expected"),
    [
        (0.0, (0.9, 0.0, 0.0)),  # only the point that fires on nothing
        (0.09, (0.9, 0.0, 0.0)),
        (0.1, (0.5, 0.1, 0.02)),  # exactly at the budget: admitted
        (0.15, (0.3, 0.15, 0.05)),
        (0.3, (0.3, 0.15, 0.05)),  # a tie in gain goes to the lower fire rate
        (0.59, (0.3, 0.15, 0.05)),
        (0.6, (0.0, 0.6, 0.08)),
        (1.0, (0.0, 0.6, 0.08)),
    ],
)
def test_choose_threshold_takes_the_largest_gain_within_the_budget(budget, expected) -> None:
    pick = choose_threshold(FRONTIER, budget)
    assert (pick["min_gain"], pick["fire_rate"], pick["gain"]) == expected


def test_choose_threshold_tie_goes_to_the_lower_fire_rate_in_either_order() -> None:
    tied = [[0.1, 0.3, 0.05], [0.3, 0.15, 0.05]]
    assert choose_threshold(tied, 1.0)["min_gain"] == 0.3
    assert choose_threshold(tied[::-1], 1.0)["min_gain"] == 0.3


def test_choose_threshold_refuses_a_frontier_without_a_point_within_budget() -> None:
    with pytest.raises(SelectorError, match=r"fires on at most 0\.100 of the dev decisions"):
        choose_threshold([[0.0, 0.2, 0.1]], 0.1)
    with pytest.raises(SelectorError):
        choose_threshold([], 0.5)


def test_thresholds_for_budget_uses_its_own_else_the_default() -> None:
    th = Thresholds(0.4, {2: 0.1, 4: 0.2})
    assert (th.for_budget(2), th.for_budget(4), th.for_budget(3)) == (0.1, 0.2, 0.4)


def _model(**calibration):  # type: ignore[no-untyped-def]
    return SimpleNamespace(calibration=calibration)


def test_auto_picks_pooled_and_per_budget_thresholds_from_the_frontiers(caplog) -> None:
    model = _model(frontier=FRONTIER, frontier_by_budget={"2": [[0.7, 0.0, 0.0], [0.2, 0.1, 0.03]]})
    with caplog.at_level(logging.INFO, logger="causalcache_memory.selector.threshold"):
        th = resolve_thresholds("auto", model, second_pass_share=0.15)
    assert th.default == 0.3 and th.by_budget == {2: 0.2}
    assert th.source.startswith("auto: pass-2 share 0.15 -> min_gain 0.3000 pooled (dev fire rate 0.150")
    assert "per memory budget B=2: 0.2000 (fire 0.100)" in th.source
    assert "0.3000 at other" in caplog.text
    assert resolve_min_gain("auto", model, second_pass_share=0.15) == (0.3, th.source)


def test_auto_without_per_budget_frontiers_has_only_the_pooled_one() -> None:
    th = resolve_thresholds("auto", _model(frontier=FRONTIER), second_pass_share=0.1)
    assert th.default == 0.5 and th.by_budget == {} and "per memory budget" not in th.source


def test_auto_without_calibration_is_the_papers_rule() -> None:
    th = resolve_thresholds("auto", _model())
    assert th.default == 0.0 and th.source == "auto: model has no calibration, the paper's rule (0)"


@pytest.mark.parametrize("value", [0, 0.0, 0.7, 3])
def test_a_number_is_used_for_every_budget(value) -> None:
    th = resolve_thresholds(value, _model(frontier=FRONTIER))
    assert th.default == float(value) and th.by_budget == {} and th.source.startswith("fixed")


@pytest.mark.parametrize("bad", ["Auto", "0.1", "other", -0.1, float("inf"), float("nan"), True])
def test_min_gain_refuses_anything_but_auto_or_a_finite_number_at_least_zero(bad) -> None:
    with pytest.raises(SelectorError, match=r"must be 'auto' or a number >= 0"):
        resolve_thresholds(bad, _model())


@pytest.mark.parametrize(("window", "expected"), [(None, None), (1, 1), (200, 200)])
def test_check_window_accepts_none_or_positive_integers(window, expected) -> None:
    assert check_window(window) == expected


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "200"])
def test_check_window_refuses_anything_else_naming_the_field(bad) -> None:
    with pytest.raises(SelectorError, match=rf"w={bad!r} must be an integer >= 1"):
        check_window(bad, field="w")


def test_the_deployment_uses_the_dev_threshold_until_the_warmup_is_reached() -> None:
    dep = DeploymentThreshold(Thresholds(0.4, {3: 0.1}), 0.5, 10, warmup=4)
    for gain in (1.0, 2.0, 3.0):
        dep.observe(3, gain)
        assert dep.threshold(3) == (0.1, "dev")
    dep.observe(3, 4.0)  # the 4th decision at B = 3: the window's own quantile from now on
    assert dep.threshold(3) == (2.0, "deployment")  # m = 2 of 4 above 2.0
    assert dep.threshold(2) == (0.4, "dev")  # another B has its own window


def test_default_warmup_is_min_of_window_and_twenty() -> None:
    assert DeploymentThreshold(Thresholds(0.0), 0.1, 200).warmup == 20
    assert DeploymentThreshold(Thresholds(0.0), 0.1, 5).warmup == 5
    assert DeploymentThreshold(Thresholds(0.0), 0.1, None).window == 200  # type: ignore[arg-type]
    assert DeploymentThreshold(Thresholds(0.0), 0.1, 10, warmup=0).warmup == 1
    assert DeploymentThreshold(Thresholds(0.0), 0.1, 10, warmup=50).warmup == 10


@pytest.mark.parametrize(
    ("n", "budget", "expected"),
    [
        (10, 0.1, 9.0),  # m = 1: one of 1..10 above 9
        (10, 0.15, 9.0),  # m = floor(1.5) = 1
        (10, 0.2, 8.0),  # m = 2
        (10, 0.3, 7.0),  # m = floor(3.0000000000000004) = 3 (0.3 * 10 is not exactly 3)
        (9, 0.1, math.inf),  # m = 0: no decision may run pass 2
        (20, 0.15, 17.0),  # m = 3
        (10, 1.0, 0.0),  # m = n: every positive gain, never below 0
    ],
)
def test_the_deployment_threshold_lets_at_most_floor_b_n_decisions_above_it(n, budget, expected) -> None:
    dep = DeploymentThreshold(Thresholds(0.5), budget, 50, warmup=1)
    for gain in range(n, 0, -1):  # gains 1..n observed in descending order
        dep.observe(4, float(gain))
    tau, source = dep.threshold(4)
    assert source == "deployment" and tau == expected
    assert sum(g > tau for g in range(1, n + 1)) == math.floor(budget * n + 1e-9)


def test_the_deployment_threshold_is_never_negative() -> None:
    dep = DeploymentThreshold(Thresholds(0.5), 0.5, 10, warmup=1)
    for gain in (-3.0, -2.0, -1.0, -0.5):
        dep.observe(2, gain)
    assert dep.threshold(2) == (0.0, "deployment")


def test_the_window_keeps_only_the_latest_decisions_and_ignores_non_finite_gains() -> None:
    dep = DeploymentThreshold(Thresholds(0.5), 0.5, 4, warmup=4)
    for gain in (100.0, 90.0, 1.0, 2.0, 3.0, 4.0, float("inf"), float("-inf"), float("nan")):
        dep.observe(2, gain)
    assert dep.threshold(2) == (2.0, "deployment")  # window {1, 2, 3, 4}: m = 2


def test_choose_threshold_reads_every_row_whatever_their_order() -> None:
    shuffled = [[0.0, 0.6, 0.08], [0.5, 0.1, 0.02], [0.3, 0.15, 0.05], [0.9, 0.0, 0.0]]
    assert choose_threshold(shuffled, 0.2)["min_gain"] == 0.3  # rows over budget are skipped, not the end
    assert (
        choose_threshold([[0.3, 0.15, 0.05], [0.9, 0.0, 0.0]], 1.0)["min_gain"] == 0.3
    )  # a lower gain later


def test_choose_threshold_compares_gains_by_value() -> None:
    tie = float("0.05")  # equal to the literal 0.05, another float object (made at run time)
    assert choose_threshold([[0.1, 0.3, 0.05], [0.3, 0.15, tie]], 1.0)["min_gain"] == 0.3
    same = [[0.3, 0.15, 0.05], [0.2, 0.15, 0.05]]  # equal gain and fire rate: the first row is kept
    assert choose_threshold(same, 1.0)["min_gain"] == 0.3


def test_thresholds_are_frozen() -> None:
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        Thresholds(0.1).default = 0.2  # type: ignore[misc]


def test_a_budget_of_one_over_a_long_window_admits_every_positive_gain() -> None:
    dep = DeploymentThreshold(Thresholds(0.5), 1.0, 300, warmup=300)
    for gain in range(1, 301):
        dep.observe(2, float(gain))
    assert dep.threshold(2) == (0.0, "deployment")  # m = n = 300 (beyond the small-int cache)
