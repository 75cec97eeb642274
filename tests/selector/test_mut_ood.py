"""The OOD guard's smaller rules, each on values worked out by hand (issue 52's mutation run of
``selector/ood.py`` and ``selector/ood_masks.py``; the fitted guard is in ``test_guard_by_hand.py``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.ood import (
    FALSE_ALARM_RATE,
    GUARD_KIND,
    GUARD_MIN_STATES,
    SCALE_FLOOR,
    GuardFitError,
    RobustGuard,
    _ledoit_wolf,
    guard_columns,
    guard_fit_size_check,
    load_guard,
    min_guard_states,
    state_summary,
)
from causalcache_memory.selector.ood_masks import (
    FULL_PATTERN,
    MASK_GROUPS,
    group_columns,
    marginal_precision,
    mask_summary,
    pattern_key,
    patterns,
    state_pattern,
)

NAMES = [
    "age_log",
    "app_available",
    "app_in_goal",
    "text_available",
    "text_goal_cover",
    "image_available",
    "image_mean",
]


# ------------------------------------------------------------------ ood_masks
def test_the_mask_groups_and_the_full_pattern_key() -> None:
    assert MASK_GROUPS == ("app", "text", "image") and FULL_PATTERN == ""


def test_group_columns_put_the_availability_column_first() -> None:
    names = ["text_goal_cover", "age_log", "text_available", "app_in_goal", "app_available", "text_x"]
    assert group_columns(names) == {"app": (4, 3), "text": (2, 0, 5)}


def test_group_columns_keep_only_groups_with_a_watched_column() -> None:
    assert group_columns(NAMES, [0, 4]) == {"text": (3, 4)}
    assert group_columns(NAMES, [1]) == {"app": (1, 2)}  # the availability column alone counts
    assert group_columns(NAMES, [0]) == {}
    assert set(group_columns(NAMES, [])) == {"app", "text", "image"}  # nothing named: every group


def test_a_group_without_its_availability_column_is_not_a_group() -> None:
    assert group_columns(["app_in_goal", "text_available"]) == {"text": (1,)}


def test_pattern_keys_follow_the_group_order() -> None:
    assert pattern_key(["image", "app"]) == "app+image" and pattern_key([]) == ""
    assert pattern_key(["text", "text"]) == "text"
    assert patterns(["image", "text", "app"]) == [
        "app",
        "text",
        "image",
        "app+text",
        "app+image",
        "text+image",
        "app+text+image",
    ]
    assert patterns(["text"]) == ["text"] and patterns([]) == []


def test_state_pattern_is_the_groups_whose_availability_mean_is_exactly_zero() -> None:
    groups = group_columns(NAMES)
    z = np.array([0.5, 0.0, 0.3, 1e-9, 0.0, 0.0, 0.0])
    assert state_pattern(z, groups) == "app+image"  # text available on some event (1e-9 > 0)
    assert state_pattern(np.ones(7), groups) == ""


def test_mask_summary_zeroes_every_column_of_the_masked_groups_only() -> None:
    groups = group_columns(NAMES)
    z = np.arange(1.0, 8.0)
    np.testing.assert_array_equal(mask_summary(z, groups, "app+image"), [1, 0, 0, 4, 5, 0, 0])
    np.testing.assert_array_equal(mask_summary(z, groups, ""), z)
    rows = np.ones((3, 7), np.float32)
    out = mask_summary(rows, groups, "text")
    assert out.dtype == np.float64 and (out[:, [3, 4]] == 0).all() and (out[:, [0, 1, 2, 5, 6]] == 1).all()
    assert (rows == 1).all()  # a copy: the caller's array is untouched


def test_marginal_precision_is_the_inverse_of_the_sub_covariance() -> None:
    cov = np.array([[4.0, 2.0, 0.0], [2.0, 3.0, 1.0], [0.0, 1.0, 2.0]])
    # Σ_SS for S = {0, 2} is diag(4, 2): its inverse diag(1/4, 1/2); not the sub-matrix of Σ^-1
    np.testing.assert_allclose(marginal_precision(cov, [0, 2]), [[0.25, 0.0], [0.0, 0.5]])
    sub = np.linalg.inv(cov)[np.ix_([0, 2], [0, 2])]
    assert not np.allclose(sub, [[0.25, 0.0], [0.0, 0.5]])
    assert marginal_precision(cov, []).shape == (0, 0)
    skew = np.array([[2.0, 1.0], [0.0, 2.0]])  # symmetrised
    got = marginal_precision(skew, [0, 1])
    np.testing.assert_allclose(got, got.T)


# ------------------------------------------------------------------ ood
def test_guard_constants() -> None:
    assert (FALSE_ALARM_RATE, GUARD_MIN_STATES, SCALE_FLOOR, GUARD_KIND) == (
        0.01,
        30,
        0.1,
        "robust-shrinkage",
    )


def test_state_summary_is_the_column_mean_with_dropped_columns_zero() -> None:
    events = np.array([[1.0, 2.0, 3.0], [3.0, 4.0, 5.0]], np.float32)
    np.testing.assert_array_equal(state_summary(events), [2.0, 3.0, 4.0])
    np.testing.assert_array_equal(state_summary(events, [1]), [2.0, 0.0, 4.0])
    assert state_summary(events).dtype == np.float64


@pytest.mark.parametrize(("d", "need"), [(0, 30), (14, 30), (15, 30), (16, 32), (57, 114)])
def test_min_guard_states_is_max_30_and_two_per_feature(d, need) -> None:
    assert min_guard_states(d) == need


def test_guard_fit_size_check_refuses_one_below_and_names_the_shortfall() -> None:
    guard_fit_size_check(32, 16)  # exactly at: accepted
    with pytest.raises(
        GuardFitError, match=r"at least 32 training decision states for 16 features .* got 31: label 1 more"
    ):
        guard_fit_size_check(31, 16)


def test_guard_columns_leave_out_dropped_constant_and_identity_columns() -> None:
    names = ["a", "b", "c", "verb_id", "width_px", "d"]
    z = np.array([[0, 1, 5, 1, 1, 0], [1, 1, 5, 2, 3, 1], [2, 1, 5, 3, 2, 0]], float)
    assert guard_columns(names, z) == [0, 5]  # b, c constant; *_id, *_px identity
    assert guard_columns(names, z, drop=[0]) == [5]
    assert guard_columns(names, z, tol=0.5) == [0]  # std of d is 0.47


def test_ledoit_wolf_intensity_is_at_least_one_half_and_shrinks_towards_the_mean_variance() -> None:
    rng = np.random.default_rng(0)
    u = rng.normal(size=(400, 3)) * [1.0, 2.0, 3.0]
    sigma, delta = _ledoit_wolf(u)
    x = u - u.mean(0)
    s = x.T @ x / len(u)
    mu = np.trace(s) / 3
    assert delta == 0.5  # plenty of states: the estimate is small, the floor applies
    np.testing.assert_allclose(sigma, 0.5 * s + 0.5 * mu * np.eye(3), rtol=1e-12)
    few = rng.normal(size=(4, 3))
    _, delta_few = _ledoit_wolf(few)
    assert 0.5 <= delta_few <= 1.0


def test_ledoit_wolf_on_identical_states_is_the_floor() -> None:
    sigma, delta = _ledoit_wolf(np.ones((5, 2)))
    assert delta == 0.5 and (sigma == 0).all()


def _states(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    z = rng.uniform(0.0, 1.0, size=(n, len(NAMES)))
    z[:, [1, 3, 5]] = rng.uniform(0.3, 1.0, size=(n, 3))
    return z


@pytest.fixture(scope="module")
def guard() -> RobustGuard:
    return RobustGuard.fit(NAMES, _states(60, 1), _states(100, 2))


def test_fit_refuses_a_false_alarm_rate_outside_zero_to_one() -> None:
    for bad in (-0.01, 1.0, 1.5):
        with pytest.raises(GuardFitError, match=rf"false_alarm_rate={bad!r} must be in \[0, 1\)"):
            RobustGuard.fit(NAMES, _states(60, 1), false_alarm_rate=bad)
    assert RobustGuard.fit(NAMES, _states(60, 1), false_alarm_rate=0.0).false_alarm_rate == 0.0


def test_fit_refuses_too_few_states_or_nothing_varying() -> None:
    with pytest.raises(GuardFitError, match="needs at least 30"):
        RobustGuard.fit(NAMES, _states(29, 1))
    with pytest.raises(GuardFitError, match="no feature varies across the training states"):
        RobustGuard.fit(NAMES, np.ones((40, len(NAMES))))
    RobustGuard.fit(NAMES, _states(30, 1))  # exactly at the minimum


def test_fit_without_dev_states_sets_the_threshold_on_training() -> None:
    train = _states(60, 1)
    a, b = RobustGuard.fit(NAMES, train), RobustGuard.fit(NAMES, train, np.zeros((0, len(NAMES))))
    dists = sorted(a.distance(z) for z in train)
    assert a.threshold == b.threshold == dists[59]  # ceil(0.99 * 60) - 1 = 59: the largest of 60
    assert a.rule.endswith("flags at most 0.01 of the dev states")


def test_the_scale_uses_the_std_where_the_mad_is_zero_and_the_floor_below_it() -> None:
    z = _states(60, 3)
    z[:, 0] = 0.5
    z[:3, 0] = [0.0, 1.0, 2.0]  # MAD 0 (most values equal), std > floor
    z[:, 2] = 0.5
    z[:2, 2] = [0.51, 0.49]  # MAD 0, std below the floor
    g = RobustGuard.fit(NAMES, z)
    assert g.scale[0] == pytest.approx(z[:, 0].std()) and g.scale[2] == SCALE_FLOOR
    assert g.center[0] == 0.5


@np.errstate(invalid="ignore")  # NaN through the matmul: numpy's warning is not what is tested
def test_a_non_finite_summary_is_out_of_distribution(guard) -> None:
    z = guard.center.copy()
    z[0] = np.nan
    flagged, dist = guard.is_ood(z)
    assert flagged and dist == float("inf")
    z[0] = np.inf
    assert guard.is_ood(z)[0]
    masked = mask_summary(guard.center.copy(), guard.mask_groups, "text")
    masked[0] = np.nan
    assert guard.judge(masked)[1] == float("inf") and guard.is_ood(masked)[0]


def test_is_ood_scales_the_threshold(guard) -> None:
    z = guard.center.copy()
    z[0] += 0.5
    _, dist, thr = guard.judge(z)
    assert guard.is_ood(z, scale=dist / thr * 0.99)[0] and not guard.is_ood(z, scale=dist / thr * 1.01)[0]
    at = RobustGuard(guard.features, guard.columns, guard.center, guard.scale, guard.precision, dist)
    assert not at.is_ood(z)[0]  # a distance equal to the threshold is accepted


def test_the_training_median_is_at_distance_zero(guard) -> None:
    assert guard.distance(guard.center) == 0.0
    assert guard.judge(guard.center) == ("", 0.0, guard.threshold)


def test_a_guard_without_mask_thresholds_judges_every_state_on_all_columns(guard) -> None:
    old = RobustGuard(guard.features, guard.columns, guard.center, guard.scale, guard.precision, 3.0)
    masked = mask_summary(guard.center, guard.mask_groups, "text")
    assert old.pattern(masked) == "" and old.judge(masked) == ("", old.distance(masked), 3.0)
    partial = RobustGuard(
        guard.features, guard.columns, guard.center, guard.scale, guard.precision, 3.0,
        mask_groups=guard.mask_groups, mask_thresholds={"app": 2.0},
    )  # fmt: skip
    assert partial.pattern(masked) == ""  # a pattern without its own threshold: the full guard
    assert partial.pattern(mask_summary(guard.center, guard.mask_groups, "app")) == "app"


def test_json_round_trip_keeps_every_statistic(guard) -> None:
    back = load_guard(guard.to_json(), NAMES)
    assert isinstance(back, RobustGuard)
    assert back.columns == guard.columns and back.threshold == guard.threshold
    assert back.false_alarm_rate == guard.false_alarm_rate and back.shrinkage == guard.shrinkage
    assert dict(back.mask_groups) == dict(guard.mask_groups) and dict(back.mask_thresholds) == dict(
        guard.mask_thresholds
    )
    np.testing.assert_array_equal(back.precision, guard.precision)
    data = json.loads(guard.to_json())
    assert data["kind"] == GUARD_KIND and data["columns"] == [NAMES[i] for i in guard.columns]
    assert data["mask_groups"]["text"] == ["text_available", "text_goal_cover"]
    z = _states(5, 9)
    assert [back.judge(s) for s in z] == [guard.judge(s) for s in z]


def test_a_guard_stored_before_masks_reads_with_the_defaults(guard) -> None:
    data = json.loads(guard.to_json())
    for key in ("mask_groups", "mask_thresholds", "false_alarm_rate", "shrinkage"):
        del data[key]
    back = load_guard(json.dumps(data), NAMES)
    assert back.mask_groups == {} and back.mask_thresholds == {}
    assert back.false_alarm_rate == FALSE_ALARM_RATE and back.shrinkage == 0.0


def _edited(guard: RobustGuard, **changes) -> str:  # type: ignore[no-untyped-def]
    data = json.loads(guard.to_json())
    data.update(changes)
    return json.dumps(data)


def test_load_guard_refuses_other_feature_lists_naming_the_difference(guard) -> None:
    with pytest.raises(
        SelectorError,
        match=r"m: causalcache.ood statistics describe 7 features, but the model has 7 \(another order\)",
    ):
        load_guard(guard.to_json(), NAMES[::-1], source="m")
    with pytest.raises(SelectorError, match=r"has 6 \(another list\)"):
        load_guard(guard.to_json(), NAMES[:6], source="m")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"center": [0.0]}, "have center"),
        ({"scale": [1.0]}, "scale"),
        ({"precision": [[1.0]]}, "precision"),
        ({"threshold": 0.0}, "not finite"),
        ({"threshold": -1.0}, "not finite"),
        ({"mask_thresholds": {"audio": 1.0}}, "mask_thresholds"),
        ({"mask_thresholds": {"text": 0.0}}, "not positive"),
        ({"mask_thresholds": {"text": float("inf")}}, "not positive"),
        ({"kind": "other"}, "guard kind 'other'"),
        ({"columns": ["nope"]}, "malformed"),
    ],
)
def test_load_guard_refuses_malformed_statistics(guard, change, message) -> None:
    with pytest.raises(SelectorError, match=message):
        load_guard(_edited(guard, **change), NAMES, source="m")


def test_load_guard_refuses_non_finite_or_non_positive_scales(guard) -> None:
    d = len(guard.columns)
    for bad in ([float("nan")] * d, [0.0] * d, [-1.0] * d):
        with pytest.raises(SelectorError, match="not finite"):
            load_guard(_edited(guard, scale=bad), NAMES)
    center = [float("inf")] * d
    with pytest.raises(SelectorError, match="not finite"):
        load_guard(_edited(guard, center=center), NAMES)
    with pytest.raises(SelectorError, match="not finite"):
        load_guard(_edited(guard, precision=[[float("nan")] * d] * d), NAMES)


def test_load_guard_refuses_a_format_two_guard_and_junk() -> None:
    legacy = json.dumps(
        {"features": NAMES[:3], "center": [0.0] * 3, "precision": [[1.0, 0, 0]] * 3, "threshold": 2.0}
    )
    with pytest.raises(
        SelectorError, match="format 2"
    ):  # no "kind": the format-2 guard, refused with the fix
        load_guard(legacy, NAMES[:3])
    with pytest.raises(SelectorError, match="malformed"):
        load_guard("not json", NAMES)
    with pytest.raises(SelectorError, match="malformed"):
        load_guard("[1, 2]", NAMES)


def test_a_group_column_sorting_before_its_availability_column_is_still_in_the_group() -> None:
    # "text_age" < "text_available": membership is the prefix, not the order of the names
    assert group_columns(["text_available", "text_age", "text_zone"]) == {"text": (0, 1, 2)}


def _ledoit_wolf_by_hand(u: np.ndarray) -> tuple[np.ndarray, float]:
    """Ledoit & Wolf (2004) towards ``(tr S / d) I``, one sample at a time: ``S = (1/n) Σ x_k x_kᵀ`` on
    centered rows, ``d² = ‖S − μI‖²_F``, ``b̄² = (1/n²) Σ_k ‖x_k x_kᵀ − S‖²_F``, ``δ = min(b̄², d²) / d²``,
    floored at one half."""
    n, d = u.shape
    xs = [row - u.mean(axis=0) for row in u]
    s = sum(np.outer(x, x) for x in xs) / n
    mu = np.trace(s) / d
    d2 = ((s - mu * np.eye(d)) ** 2).sum()
    b2 = sum(((np.outer(x, x) - s) ** 2).sum() for x in xs) / n**2
    delta = max(min(b2, d2) / d2, 0.5)
    return (1 - delta) * s + delta * mu * np.eye(d), delta


@pytest.mark.parametrize("scale", [1.0, 0.01])  # 0.01: ‖S − μI‖² and b̄² far below one
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_ledoit_wolf_intensity_above_the_floor_equals_the_formula_computed_sample_by_sample(
    seed, scale
) -> None:
    rng = np.random.default_rng(seed)
    u = rng.standard_t(3, size=(5, 4)) * [1.0, 3.0, 0.5, 2.0] * scale  # few heavy-tailed states: δ above 1/2
    sigma, delta = _ledoit_wolf(u)
    want_sigma, want_delta = _ledoit_wolf_by_hand(u)
    assert want_delta > 0.5  # the case the floor does not hide
    assert delta == pytest.approx(want_delta, rel=1e-12)
    np.testing.assert_allclose(sigma, want_sigma, rtol=1e-10, atol=1e-12)


def test_the_shortfall_in_the_size_refusal_is_the_difference() -> None:
    with pytest.raises(GuardFitError, match=r"got 10: label 22 more states"):
        guard_fit_size_check(10, 16)  # needs 32: 32 - 10 (not 32 // 10 or 32 % 10)


def test_the_guard_is_translation_invariant(guard) -> None:
    # the states are centered on their median before the covariance: shifting every state shifts nothing
    shift = np.linspace(5.0, 40.0, len(NAMES))
    moved = RobustGuard.fit(NAMES, _states(60, 1) + shift, _states(100, 2) + shift)
    np.testing.assert_allclose(moved.precision, guard.precision, rtol=1e-9, atol=1e-12)
    assert moved.threshold == pytest.approx(guard.threshold, rel=1e-9)
    probe = _states(3, 7)
    for z in probe:
        assert moved.distance(z + shift) == pytest.approx(guard.distance(z), rel=1e-9)


def test_a_stored_guard_with_thresholds_below_one_is_read(guard) -> None:
    small = {k: 0.5 for k in guard.mask_thresholds}
    back = load_guard(_edited(guard, threshold=0.5, mask_thresholds=small), NAMES)
    assert back.threshold == 0.5 and set(back.mask_thresholds.values()) == {0.5}
    with pytest.raises(SelectorError):
        load_guard(_edited(guard, mask_thresholds={**small, "app": -0.5}), NAMES)  # negative: refused


@pytest.mark.parametrize("field", ["center", "scale"])
def test_a_stored_guard_with_a_vector_one_too_long_is_refused(guard, field) -> None:
    data = json.loads(guard.to_json())
    with pytest.raises(SelectorError):
        load_guard(_edited(guard, **{field: [*data[field], 1.0]}), NAMES)


def test_a_stored_guard_with_a_precision_one_too_large_is_refused(guard) -> None:
    d = len(json.loads(guard.to_json())["precision"])
    bigger = np.eye(d + 1).tolist()
    with pytest.raises(SelectorError):
        load_guard(_edited(guard, precision=bigger), NAMES)


def test_all_zero_distances_give_a_small_positive_threshold() -> None:
    from causalcache_memory.selector.ood import _order_threshold

    assert _order_threshold([0.0, 0.0, 0.0], 0.01) == 1e-9  # a threshold of 0 would flag every state


def test_a_column_whose_spread_equals_the_tolerance_is_left_out() -> None:
    z = np.array([[0.0], [1.0]])  # std exactly 0.5
    assert guard_columns(["a"], z, tol=0.5) == [] and guard_columns(["a"], z, tol=0.49) == [0]


def test_the_fitted_guard_is_frozen(guard) -> None:
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        guard.threshold = 1.0  # type: ignore[misc]
