"""Bootstrap statistics (``lab/eval/stats.py``): the contract points the mutation run found unchecked.

Every gate of the evaluation (closed loop, allocation ladder, DiD) reads an :class:`Estimate`, so the record
must not change after it is made, the options must not be misread from a stray positional argument, and
the split interaction's interval must be the percentile interval of the *stratified* bootstrap of
``Δ(split) - Δ(rest)`` at the requested level.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from causalcache_lab.eval.stats import Estimate, cluster_bootstrap, split_interaction


def test_estimates_are_frozen_slotted_records() -> None:
    """A gate decision and the report that prints it read the same estimate: it cannot be edited in
    between, and (one per task, arm and split) it carries no per-instance ``__dict__``."""
    est = cluster_bootstrap([0.0, 1.0, 1.0], n_boot=50)
    with pytest.raises(dataclasses.FrozenInstanceError):
        est.low = -1.0  # type: ignore[misc]
    assert not hasattr(est, "__dict__")
    assert {est: "kept"}[Estimate(est.value, est.low, est.high, est.n)] == "kept"  # frozen => hashable


def test_bootstrap_options_are_keyword_only() -> None:
    """``n_boot``, ``level`` and ``seed`` are all numbers: a positional third argument would be read as
    whichever comes first, so it is refused; the data arguments may still be named."""
    with pytest.raises(TypeError):
        cluster_bootstrap([1.0, 2.0], None, 100)  # type: ignore[misc]
    with pytest.raises(TypeError):
        split_interaction([1.0, 0.0], [0.0, 0.0], [True, False], 100)  # type: ignore[misc]
    named = cluster_bootstrap(values=[1.0, 2.0], clusters=["a", "b"], n_boot=10)
    assert (named.value, named.n) == (1.5, 2)
    inter = split_interaction(treatment=[1.0, 0.0], control=[0.0, 0.0], in_split=[True, False], n_boot=10)
    assert (inter.value, inter.n) == (1.0, 2)


def test_more_cluster_labels_than_values_are_refused() -> None:
    """One label per value: a longer label list means the two were misaligned, in either direction."""
    with pytest.raises(ValueError, match="clusters has 3 entries but values has 2"):
        cluster_bootstrap([1.0, 2.0], ["a", "b", "c"])


def test_interaction_interval_is_centred_on_the_difference_of_strata() -> None:
    """With no variance inside either stratum every resample gives ``Δ(split) - Δ(rest)`` exactly:
    ``1.0 - 0.25``, not the sum of the two effects."""
    treat = [1.0, 1.0, 0.5, 0.5, 0.5]
    ctrl = [0.0, 0.0, 0.25, 0.25, 0.25]
    est = split_interaction(treat, ctrl, [True, True, False, False, False])
    assert (est.value, est.low, est.high, est.n) == (0.75, 0.75, 0.75, 5)


def _stratified_bootstrap(a: np.ndarray, b: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    """Resample each stratum on its own (the split first, then the rest), indices drawn uniformly."""
    rng = np.random.default_rng(seed)
    mean_a = a[rng.integers(0, a.size, size=(n_boot, a.size))].mean(axis=1)
    mean_b = b[rng.integers(0, b.size, size=(n_boot, b.size))].mean(axis=1)
    return mean_a - mean_b


@pytest.mark.parametrize("level", [0.95, 0.5, 0.8])
def test_interaction_interval_is_the_central_percentile_interval(level: float) -> None:
    """``level`` is the central coverage: the bounds are the ``(1 - level) / 2`` and ``(1 + level) / 2``
    quantiles of the stratified bootstrap (0.025/0.975 by default; the quartiles at 0.5)."""
    rng = np.random.default_rng(11)
    treat, ctrl = rng.normal(0.5, 1.0, size=21), rng.normal(0.0, 1.0, size=21)
    in_split = np.arange(21) < 9
    d = treat - ctrl
    boot = _stratified_bootstrap(d[in_split], d[~in_split], 2000, 0)
    low, high = np.quantile(boot, [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    kwargs = {} if level == 0.95 else {"level": level}
    est = split_interaction(treat, ctrl, in_split, **kwargs)
    assert est.value == pytest.approx(d[in_split].mean() - d[~in_split].mean())
    assert est.low == pytest.approx(low, abs=1e-12) and est.high == pytest.approx(high, abs=1e-12)
    assert est.low < est.value < est.high and est.n == 21
