"""Bootstrap statistics: exact values on data whose bootstrap distribution is known, the documented
defaults, and the degenerate cases."""

from __future__ import annotations

import math

import numpy as np
import pytest

from causalcache_lab.eval.stats import (
    Estimate,
    cluster_bootstrap,
    paired_difference,
    split_interaction,
)


def test_a_constant_sample_has_a_zero_width_interval() -> None:
    est = cluster_bootstrap([0.25] * 7)
    assert (est.value, est.low, est.high, est.n) == (0.25, 0.25, 0.25, 7)


def test_clusters_are_resampled_whole_and_pooled_by_size() -> None:
    """Cluster a = one 0, cluster b = nine 1s: a resample of two clusters pools to 0 (a, a), 0.9 (a, b)
    or 1 (b, b), each with a known probability, so the 95% interval is exactly [0, 1]."""
    values = [0.0] + [1.0] * 9
    clusters = ["a"] + ["b"] * 9
    est = cluster_bootstrap(values, clusters, n_boot=4000)
    assert est.value == pytest.approx(0.9) and est.n == 10
    assert est.low == 0.0 and est.high == 1.0
    narrow = cluster_bootstrap(values, clusters, n_boot=4000, level=0.4)  # quantiles 0.3 and 0.7
    assert narrow.low == pytest.approx(0.9) and narrow.high == pytest.approx(0.9)
    per_value = cluster_bootstrap(values, n_boot=4000)  # each value its own cluster: 0.9 is the mean
    assert 0.5 < per_value.low < 0.9 < per_value.high <= 1.0


def test_level_sets_the_quantiles() -> None:
    x = np.random.default_rng(5).normal(size=60)
    wide, mid, point = (cluster_bootstrap(x, level=lv) for lv in (0.95, 0.5, 0.0))
    assert wide.low < mid.low < point.low == point.high < mid.high < wide.high
    assert point.low == pytest.approx(float(np.median(_boot_means(x))))


def _boot_means(x: np.ndarray, n_boot: int = 2000, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)


def test_defaults_are_2000_draws_95_percent_seed_0() -> None:
    x = np.random.default_rng(6).normal(size=40)
    assert cluster_bootstrap(x) == cluster_bootstrap(x, n_boot=2000, level=0.95, seed=0)
    assert cluster_bootstrap(x) != cluster_bootstrap(x, seed=1)
    means = _boot_means(x)
    low, high = np.quantile(means, [0.025, 0.975])
    est = cluster_bootstrap(x)
    assert est.low == pytest.approx(low) and est.high == pytest.approx(high)
    t, c = x[:20], x[20:]
    assert paired_difference(t, c) == cluster_bootstrap(t - c)
    assert paired_difference(t, c, seed=3) == cluster_bootstrap(t - c, seed=3)
    in_split = [True] * 10 + [False] * 10
    assert split_interaction(t, c, in_split) == split_interaction(
        t, c, in_split, n_boot=2000, level=0.95, seed=0
    )
    assert split_interaction(t, c, in_split) != split_interaction(t, c, in_split, seed=1)


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="clusters has 2 entries but values has 3"):
        cluster_bootstrap([1.0, 2.0, 3.0], ["a", "b"])
    with pytest.raises(ValueError, match="differ in length"):
        paired_difference([1.0], [1.0, 0.0])


def test_empty_inputs_give_nan_with_the_count() -> None:
    empty = cluster_bootstrap([])
    assert empty.n == 0 and all(math.isnan(v) for v in (empty.value, empty.low, empty.high))
    one_sided = split_interaction([1, 0, 1], [0, 0, 0], [True, True, True])
    assert one_sided.n == 3 and math.isnan(one_sided.value) and math.isnan(one_sided.low)
    assert math.isnan(split_interaction([1, 0], [0, 0], [False, False]).value)


def test_interaction_is_the_difference_of_split_means_with_a_stratified_interval() -> None:
    treat = [1, 1, 1, 0, 0, 0, 1, 0]
    ctrl = [0, 0, 1, 0, 0, 0, 0, 1]
    in_split = [True, True, True, True, False, False, False, False]
    est = split_interaction(treat, ctrl, in_split, n_boot=3000)
    assert est.value == pytest.approx(0.5 - 0.0) and est.n == 8
    assert est.low < est.value < est.high and -1.0 <= est.low and est.high <= 2.0
    constant = split_interaction([1, 1, 0, 0], [0, 0, 0, 0], [True, True, False, False])
    assert (constant.value, constant.low, constant.high) == (1.0, 1.0, 1.0)  # no variance in either stratum


@pytest.mark.parametrize(
    ("low", "high", "excludes"),
    [(0.0, 0.2, False), (1e-12, 0.2, True), (-0.2, 0.0, False), (-0.2, -1e-12, True), (-0.1, 0.1, False)],
)
def test_excludes_zero_is_strict(low: float, high: float, excludes: bool) -> None:
    est = Estimate(0.05, low, high, 4)
    assert est.excludes_zero is excludes
    assert est.to_dict() == {"value": 0.05, "ci95": [low, high], "n": 4}
