"""The OOD guard recomputed by hand (issue 52): robust standardisation, shrinkage covariance, the marginal
distance of each mask pattern and the dev order statistic, each against a direct numpy computation.

Nothing here calls the guard's own helpers to get an expected value: medians, MADs, the shrunk covariance,
its sub-matrices and the order statistic are written out below from the module docstring's formulas.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from causalcache_memory.selector.ood import FALSE_ALARM_RATE, RobustGuard, _order_threshold

# a small feature list with every maskable group (availability column first, as the extractor names them)
NAMES = (
    "age_log",
    "goal_token_jaccard",
    "app_available",
    "app_in_goal",
    "text_available",
    "text_goal_cover",
    "text_current_jaccard",
    "image_available",
    "image_mean",
)
COL = {n: i for i, n in enumerate(NAMES)}
GROUPS = {
    "app": ("app_available", "app_in_goal"),
    "text": ("text_available", "text_goal_cover", "text_current_jaccard"),
    "image": ("image_available", "image_mean"),
}


def _states(n: int, seed: int) -> np.ndarray:
    """``(n, F)`` state summaries: every group available (availability means in (0, 1])."""
    rng = np.random.default_rng(seed)
    z = rng.uniform(0.0, 1.0, size=(n, len(NAMES)))
    for group in GROUPS.values():
        z[:, COL[group[0]]] = rng.uniform(0.3, 1.0, size=n)
    return z


def _hand_fit(z_train: np.ndarray, delta: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(center, scale, Σ)`` of the module doc, written out: median, max(1.4826 MAD, 0.1), shrinkage."""
    ordered = np.sort(z_train, axis=0)
    n = len(z_train)
    center = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2.0
    mad = np.median(np.abs(z_train - center), axis=0)
    scale = np.maximum(1.4826 * mad, 0.1)
    u = (z_train - center) / scale
    x = u - u.mean(axis=0)
    s = sum(np.outer(row, row) for row in x) / len(x)
    mu = np.trace(s) / s.shape[0]
    sigma = (1.0 - delta) * s + delta * mu * np.eye(s.shape[0])
    return center, scale, sigma


def _hand_distance(z: np.ndarray, center, scale, sigma, keep: list[int]) -> float:
    """``sqrt(u_S^T (Σ_SS)^{-1} u_S)``: the marginal of Σ on ``keep`` (all columns: the full distance)."""
    u = (z[keep] - center[keep]) / scale[keep]
    sub = sigma[np.ix_(keep, keep)]
    return math.sqrt(float(u @ np.linalg.solve(sub, u)))


def _hand_threshold(distances: list[float], rate: float) -> float:
    """The smallest value with at most ``rate`` of ``distances`` strictly above it (an order statistic)."""
    ordered = sorted(distances)
    for value in ordered:
        if sum(d > value for d in ordered) <= rate * len(ordered):
            return value
    raise AssertionError("unreachable: the largest distance has none above it")


@pytest.fixture(scope="module")
def fitted() -> tuple[RobustGuard, np.ndarray, np.ndarray]:
    z_train, z_dev = _states(60, 1), _states(200, 2)
    return RobustGuard.fit(NAMES, z_train, z_dev), z_train, z_dev


def _masked(z: np.ndarray, key: str) -> np.ndarray:
    out = z.copy()
    for group in key.split("+") if key else ():
        out[..., [COL[c] for c in GROUPS[group]]] = 0.0
    return out


def _kept(key: str) -> list[int]:
    hidden = {COL[c] for g in key.split("+") if key for c in GROUPS[g]}
    return [i for i in range(len(NAMES)) if i not in hidden]


PATTERNS = ["", "app", "text", "image", "app+text", "app+image", "text+image", "app+text+image"]


def test_standardisation_is_the_median_and_the_floored_mad_of_the_training_states(fitted) -> None:
    guard, z_train, _ = fitted
    center, scale, _ = _hand_fit(z_train, guard.shrinkage)
    assert guard.columns == tuple(range(len(NAMES)))  # every column varies: all guarded
    np.testing.assert_allclose(guard.center, center, rtol=1e-12)
    np.testing.assert_allclose(guard.scale, scale, rtol=1e-12)
    assert 0.5 <= guard.shrinkage <= 1.0  # at least half shrunk (MIN_SHRINKAGE)


@pytest.mark.parametrize("key", PATTERNS)
def test_each_mask_pattern_distance_is_the_marginal_mahalanobis_distance(fitted, key) -> None:
    guard, z_train, z_dev = fitted
    center, scale, sigma = _hand_fit(z_train, guard.shrinkage)
    for z in z_dev[:20]:
        state = _masked(z, key)
        expected = _hand_distance(state, center, scale, sigma, _kept(key))
        assert guard.masked_distance(state, key) == pytest.approx(expected, rel=1e-9)
        pattern, dist, _ = guard.judge(state)
        assert pattern == key and dist == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("key", PATTERNS)
def test_each_mask_pattern_threshold_is_the_dev_order_statistic_at_one_percent(fitted, key) -> None:
    guard, z_train, z_dev = fitted
    center, scale, sigma = _hand_fit(z_train, guard.shrinkage)
    dists = [_hand_distance(_masked(z, key), center, scale, sigma, _kept(key)) for z in z_dev]
    expected = _hand_threshold(dists, FALSE_ALARM_RATE)
    got = guard.threshold if key == "" else guard.mask_thresholds[key]
    assert got == pytest.approx(expected, rel=1e-9)
    # exactly 1% of the 200 dev states (2) lie above it, as the rule states: not 0.5%, not 1.5%
    assert sum(d > got * (1 + 1e-12) for d in dists) == 2


def _state_between(guard: RobustGuard, key: str, target: float) -> np.ndarray:
    """A state of mask pattern ``key`` whose marginal distance is ``target`` (bisection along age_log
    from the training medians)."""
    base = _masked(np.array(guard.center), key)
    lo, hi = 0.0, 1.0
    while guard.masked_distance(base + hi * np.eye(len(NAMES))[0], key) < target:
        hi *= 2.0
    for _ in range(80):
        mid = (lo + hi) / 2.0
        if guard.masked_distance(base + mid * np.eye(len(NAMES))[0], key) < target:
            lo = mid
        else:
            hi = mid
    return base + hi * np.eye(len(NAMES))[0]


@pytest.fixture(scope="module")
def no_text(fitted) -> tuple[RobustGuard, np.ndarray, float, float]:
    """A state without screen text whose masked distance lies between the text and the full thresholds."""
    guard = fitted[0]
    full, text = guard.threshold, guard.mask_thresholds["text"]
    assert full != pytest.approx(text, rel=1e-3)  # the two thresholds differ on this data
    state = _state_between(guard, "text", (full + text) / 2.0)
    return guard, state, full, text


def test_a_state_without_screen_text_is_judged_by_the_text_pattern_threshold(no_text) -> None:
    guard, state, _, text = no_text
    pattern, _, threshold = guard.judge(state)
    assert pattern == "text"
    assert threshold == guard.mask_thresholds["text"] == text


def test_a_state_without_screen_text_between_the_thresholds_gets_the_text_pattern_verdict(no_text) -> None:
    guard, state, full, text = no_text
    flagged, dist = guard.is_ood(state)
    assert min(full, text) < dist < max(full, text)
    assert flagged == (dist > text)  # judged against its own pattern's threshold, not the full one


@pytest.mark.parametrize("n", [1, 2, 99, 100, 101, 150, 199, 200, 201, 250, 300, 1000])
def test_the_order_statistic_flags_at_most_the_stated_rate_and_is_the_smallest_such(n) -> None:
    distances = [float(v) for v in np.random.default_rng(n).permutation(np.arange(1, n + 1))]
    # distinct distances 1..n: at most floor(n / 100) may lie above it, so it is n - floor(n / 100)
    assert _order_threshold(distances, 0.01) == n - n // 100
    assert _order_threshold(distances, 0.05) == n - n // 20
    assert _order_threshold(distances, 0.0) == n  # rate 0: the largest distance


@pytest.mark.parametrize("n", [100, 200, 300])
def test_the_fitted_guard_flags_exactly_the_stated_share_of_its_dev_states(n) -> None:
    z_train, z_dev = _states(60, 3), _states(n, 4)
    guard = RobustGuard.fit(NAMES, z_train, z_dev)
    flagged = sum(guard.is_ood(z)[0] for z in z_dev)
    assert flagged == n // 100  # 1% of dev: 1, 2, 3 states (distances are distinct)
