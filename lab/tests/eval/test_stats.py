from __future__ import annotations

import numpy as np
import pytest

from causalcache_lab.eval.stats import cluster_bootstrap, paired_difference, split_interaction


def test_interval_covers_mean_and_shrinks_with_n() -> None:
    rng = np.random.default_rng(1)
    small = cluster_bootstrap(rng.normal(1.0, 1.0, 20))
    large = cluster_bootstrap(rng.normal(1.0, 1.0, 2000))
    assert small.low < small.value < small.high
    assert (large.high - large.low) < (small.high - small.low)
    assert large.excludes_zero


def test_clusters_widen_the_interval_for_correlated_values() -> None:
    rng = np.random.default_rng(2)
    cluster_effects = rng.normal(0, 1, 10)
    values = np.repeat(cluster_effects, 50) + rng.normal(0, 0.1, 500)
    clusters = np.repeat(np.arange(10), 50)
    naive = cluster_bootstrap(values)
    clustered = cluster_bootstrap(values, list(clusters))
    assert (clustered.high - clustered.low) > 3 * (naive.high - naive.low)


def test_paired_difference_and_interaction() -> None:
    treat = [1, 1, 1, 1, 0, 1, 0, 1, 1, 1] * 3
    ctrl = [0, 0, 1, 0, 0, 1, 0, 0, 0, 1] * 3
    est = paired_difference(treat, ctrl)
    assert est.value == pytest.approx(0.5) and est.excludes_zero
    in_split = [True] * 15 + [False] * 15
    inter = split_interaction(treat, ctrl, in_split)
    d = np.subtract(treat, ctrl)
    assert inter.value == pytest.approx(d[:15].mean() - d[15:].mean())
    with pytest.raises(ValueError, match="differ in length"):
        paired_difference([1, 2], [1])


def test_empty_is_nan() -> None:
    assert np.isnan(cluster_bootstrap([]).value)
