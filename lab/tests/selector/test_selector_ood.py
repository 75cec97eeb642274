"""The OOD guard on what the scorer relies on (issue 24): columns, shrinkage, dev false alarms, refusal."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from causalcache_lab.selector.examples import StateExample
from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.features import FEATURE_SCHEMA, NUM_FEATURES, feature_index
from causalcache_memory.selector.ood import (
    GuardFitError,
    RobustGuard,
    guard_fit_size_check,
    load_guard,
    min_guard_states,
    state_summary,
)
from causalcache_memory.selector.ood_masks import group_columns
from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

NAMES = [f"f{i}" for i in range(NUM_FEATURES)]


def _state(z: np.ndarray) -> StateExample:
    return StateExample(
        "t", 3, 1, np.tile(z, (2, 1)).astype(np.float32), np.zeros((1, 12)), [], *[np.zeros(0)] * 4
    )


def _world(n: int, rng: np.random.Generator, base: np.ndarray, spread: float = 0.05) -> list[StateExample]:
    """States around ``base`` with correlated noise (a few latent factors, like real feature means)."""
    mix = rng.normal(size=(4, NUM_FEATURES))
    return [
        _state(base + spread * (rng.normal(size=4) @ mix + 0.3 * rng.normal(size=NUM_FEATURES)))
        for _ in range(n)
    ]


def test_guard_flags_at_most_the_stated_share_of_dev_states_and_far_states():
    from causalcache_lab.selector.calibrate import fit_ood

    rng = np.random.default_rng(1)
    base = rng.random(NUM_FEATURES)
    train, dev = _world(300, rng, base), _world(200, rng, base + 0.02)  # dev: a nearby, different world
    guard, report = fit_ood(train, dev)
    assert report["split"] == "dev" and report["false_alarm_rate"] == 0.01
    assert report["dev_flagged"] <= 0.01  # calibrated on dev: at most 1% of dev states flagged
    assert not guard.is_ood(state_summary(dev[0].events))[0] or report["dev_flagged"] > 0
    shifted = state_summary(train[0].events)
    shifted[5] += 2.0  # one used feature far outside its training range
    assert guard.is_ood(shifted)[0]
    assert guard.is_ood(np.full(NUM_FEATURES, np.nan))[0]  # a non-finite state is never in distribution
    again = load_guard(guard.to_json(), guard.features)
    assert isinstance(again, RobustGuard) and again.threshold == guard.threshold
    assert again.distance(shifted) == pytest.approx(guard.distance(shifted))


def test_columns_constant_in_training_do_not_make_a_state_ood():
    """E.g. ``witness_present`` is always 1 under the gold witness; a deployed state without one is not OOD."""
    from causalcache_lab.selector.calibrate import fit_ood

    rng = np.random.default_rng(2)
    base = rng.random(NUM_FEATURES)
    col = feature_index("witness_present")
    train, dev = _world(300, rng, base), _world(100, rng, base)
    for ex in (*train, *dev):
        ex.events[:, col] = 1.0
    guard, _ = fit_ood(train, dev)
    z = state_summary(dev[1].events)
    flagged_before = guard.is_ood(z)[0]
    z[col] = 0.0
    assert guard.is_ood(z)[0] == flagged_before
    assert col not in guard.columns


def test_dropped_and_identity_columns_are_not_guarded():
    rng = np.random.default_rng(3)
    names = [*NAMES[:-2], "verb_id", "screen_width_px"]
    z = rng.random((200, NUM_FEATURES))
    guard = RobustGuard.fit(names, z, z[:50], drop=[0])
    assert 0 not in guard.columns and NUM_FEATURES - 1 not in guard.columns
    assert NUM_FEATURES - 2 not in guard.columns and len(guard.columns) == NUM_FEATURES - 3


def test_a_few_dozen_states_give_a_finite_well_conditioned_guard():
    """Shrinkage: 60 states for 25 varying columns (below the 45-column sample size that broke the old guard)."""
    rng = np.random.default_rng(4)
    z = np.zeros((60, NUM_FEATURES))
    z[:, :25] = rng.normal(size=(60, 25))
    guard = RobustGuard.fit(NAMES, z[:55], z[55:])
    assert len(guard.columns) == 25 and 0 < guard.shrinkage <= 1
    assert np.isfinite(guard.precision).all() and np.linalg.cond(guard.precision) < 1e4
    fresh = np.zeros((400, NUM_FEATURES))
    fresh[:, :25] = rng.normal(size=(400, 25))
    flagged = np.mean([guard.is_ood(x)[0] for x in fresh])
    assert flagged < 0.25  # states from the training distribution are mostly accepted


def test_too_few_states_are_refused_with_the_number_needed():
    from causalcache_lab.selector.calibrate import fit_ood

    assert min_guard_states(45) == 90 and min_guard_states(10) == 30
    with pytest.raises(GuardFitError, match=r"at least 90 training decision states for 45 features.*got 63"):
        guard_fit_size_check(63, 45)
    guard_fit_size_check(90, 45)
    rng = np.random.default_rng(5)
    few = _world(63, rng, rng.random(NUM_FEATURES))  # the real-format sample of issue 24
    with pytest.raises(GuardFitError, match=r"needs at least \d+ training decision states .* got 63"):
        fit_ood(few, few[:10])
    with pytest.raises(ValueError):  # also a ValueError, for callers that catch builtins
        guard_fit_size_check(0, 1)


def test_the_fitted_model_guard_accepts_renamed_verbs_and_larger_screens(trained):
    """Dev states whose actions use an unseen verb of a known family, or whose screen doubles, stay accepted."""
    from selector_synth import make_trajectories

    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.selector.allocator import SelectorAllocator

    _, out, _ = trained
    sel = SelectorAllocator(out, min_gain=0, **GUARD_BEFORE_TRY2)  # the model's guard on every decision
    assert isinstance(sel.model.ood, RobustGuard)
    trajs, _ = make_trajectories(6, length=14, seed=21)

    def renamed(traj):  # click -> long_press (same 'click' family, never seen in training)
        steps = tuple(
            dataclasses.replace(s, action=dataclasses.replace(s.action, type="long_press"))
            for s in traj.steps
        )
        return dataclasses.replace(traj, steps=steps)

    def doubled(traj):
        return dataclasses.replace(traj, screen_size=tuple(2 * v for v in traj.screen_size))

    checked, renamed_flagged = [], 0
    for traj in trajs:
        for t in range(6, 15):
            base = sel.allocate(AllocationContext(traj.trace_at(t), 2, witness=traj.steps[t - 1].action))
            if base.info.get("fallback") == "ood":
                continue  # only dev states the guard accepts as they are
            big = doubled(traj)
            info = sel.allocate(AllocationContext(big.trace_at(t), 2, witness=big.steps[t - 1].action)).info
            assert info.get("fallback") is None  # summaries render pixels: the text moves a little
            new = renamed(traj)
            info = sel.allocate(AllocationContext(new.trace_at(t), 2, witness=new.steps[t - 1].action)).info
            checked.append((base.info["ood_distance"], info.get("fallback") == "ood"))
            renamed_flagged += info.get("fallback") == "ood"
    assert len(checked) >= 40
    # the verb appears in the event summaries, so the text-overlap columns move (~2 distance units here):
    # a typical state (distance at most the median) stays accepted, and few are flagged at all
    median = float(np.median([d for d, _ in checked]))
    assert not any(flag for d, flag in checked if d <= median)
    assert renamed_flagged <= 0.05 * len(checked)


def test_training_on_too_few_states_keeps_no_guard_and_says_why(trained, caplog, tmp_path):
    import logging

    from causalcache_lab.data.split import trajectory_split
    from causalcache_lab.selector.train import TrainConfig, train_selector
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    _, _, examples = trained
    # a smoke run (the size rule lowered) whose 20 training states are too few for the guard
    cfg = TrainConfig(epochs=1, min_train_states=2, min_dev_states=1)

    def split(ex):
        return trajectory_split(ex.trajectory_id, dev=cfg.splits[1], test=cfg.splits[2], salt=cfg.split_salt)

    tiny = [e for e in examples if split(e) == "train"][:20] + [e for e in examples if split(e) == "dev"][:8]
    with caplog.at_level(logging.WARNING, logger="causalcache_lab.selector.calibrate"):
        result = train_selector(tiny, cfg, output_dir=tmp_path / "tiny")
    assert (
        "training decision states" in result.metadata["ood"]["skipped"]
        and "guard" not in result.metadata["ood"]
    )
    assert any("without an OOD guard" in r.getMessage() for r in caplog.records)
    assert OnnxScorer(tmp_path / "tiny").ood is None  # not guarded, and the metadata says why


def test_world_probe_reports_fire_and_ood_per_budget_and_refuses_heldout_worlds(trained, tmp_path):
    from causalcache_lab.selector.ood_probe import probe_worlds
    from causalcache_memory.errors import ConfigError

    _, out, _ = trained
    result = probe_worlds(str(out), "dev-03", tasks=2, budgets=(0.0, 1.0), workdir=str(tmp_path))
    world = result["worlds"]["dev-03"]
    assert world["tasks"] == 2 and set(world["rows"]) == {"0.0", "1.0"}
    assert world["rows"]["0.0"]["fire_rate"] <= world["rows"]["1.0"]["fire_rate"]
    assert world["rows"]["0.0"]["min_gain"] >= world["rows"]["1.0"]["min_gain"]
    assert set(world["perturbed"]) == {"verbs_renamed", "screen_doubled"}
    with pytest.raises(ConfigError, match="held"):
        probe_worlds(str(out), "heldout-00", tasks=1, workdir=str(tmp_path / "h"))


# ---------------------------------------------------------------- masked feature groups (app, text, image)
SCHEMA_NAMES = [n for n, _ in FEATURE_SCHEMA]
APP = [feature_index(n) for n in ("app_available", "app_in_goal", "app_differs_current", "app_switch_after")]
GROUPS = group_columns(SCHEMA_NAMES)  # app and image (and text, with the screen-text features)


def _labelled_world(n: int, rng: np.random.Generator, base: np.ndarray) -> list[StateExample]:
    """States whose events carry every source (each group's ``*_available`` = 1), group columns near 0.9."""
    states = _world(n, rng, base)
    for ex in states:
        for cols in GROUPS.values():
            ex.events[:, cols[0]] = 1.0
            ex.events[:, cols[1:]] = np.clip(0.9 + 0.05 * rng.normal(size=len(cols) - 1), 0.7, 1.0)
    return states


def _without(events: np.ndarray, group: str = "app") -> np.ndarray:
    """What the extractor writes when no event has the group's source (e.g. no app label): the group is 0."""
    out = np.array(events)
    out[:, list(GROUPS[group])] = 0.0
    return out


def _typical(guard: RobustGuard, dev: list[StateExample]) -> StateExample:
    """The dev state of median distance."""
    dist = [guard.distance(state_summary(ex.events)) for ex in dev]
    return dev[int(np.argsort(dist)[len(dist) // 2])]


@pytest.fixture(scope="module")
def app_guard():
    from causalcache_lab.selector.calibrate import fit_ood

    rng = np.random.default_rng(11)
    base = rng.random(NUM_FEATURES)
    train, dev = _labelled_world(300, rng, base), _labelled_world(200, rng, base + 0.02)
    guard, report = fit_ood(train, dev)
    return guard, report, dev


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_a_state_without_app_labels_but_otherwise_typical_is_not_ood(app_guard, group):
    """``app``: the user-shaped agent of issue 24 (no app labels); likewise without screen text or thumbnails."""
    guard, report, dev = app_guard
    assert APP[0] == GROUPS["app"][0] and group in guard.mask_thresholds
    assert set(GROUPS[group][1:]) <= set(guard.columns)
    z = state_summary(_without(_typical(guard, dev).events, group))
    assert guard.pattern(z) == group
    assert not guard.is_ood(z)[0]
    unmasked = dataclasses.replace(guard, mask_groups={}, mask_thresholds={})  # the guard before patterns
    assert unmasked.is_ood(z)[0]  # e.g. app_in_goal at 0, far below its training range
    # each pattern is calibrated at the stated rate on dev states masked like this one
    assert report["mask_patterns"][group]["flagged"] <= 0.01 and report["masked_in_pool"] == {"none": 200}
    both = state_summary(_without(_without(_typical(guard, dev).events, group), "app"))
    assert not guard.is_ood(both)[0]  # two groups missing: judged under their joint pattern


def test_a_masked_state_far_away_on_an_available_column_is_still_ood(app_guard):
    guard, _, dev = app_guard
    events = _without(dev[0].events)
    events[:, 5] += 2.0  # a guarded column far outside its training range
    assert guard.pattern(state_summary(events)) == "app"
    assert guard.is_ood(state_summary(events))[0]
    events[:, 5] = np.nan  # a non-finite summary is never in distribution, masked or not
    assert guard.is_ood(state_summary(events))[0]


def test_masked_distance_is_the_marginal_of_the_shrinkage_covariance(app_guard):
    guard, _, dev = app_guard
    z = state_summary(_without(dev[3].events))
    keep = [p for p, c in enumerate(guard.columns) if c not in APP]
    cov = np.linalg.inv(guard.precision)
    u = (z[[guard.columns[p] for p in keep]] - guard.center[keep]) / guard.scale[keep]
    expected = float(np.sqrt(u @ np.linalg.inv(cov[np.ix_(keep, keep)]) @ u))
    assert guard.judge(z)[:2] == ("app", pytest.approx(expected))
    conditional = float(np.sqrt(u @ guard.precision[np.ix_(keep, keep)] @ u))
    assert expected != pytest.approx(conditional)  # the sub-precision would be a different (wrong) distance


def test_states_with_every_group_available_are_judged_exactly_as_before():
    """Full pattern: same threshold as the guard fitted without groups, same distance, same decisions."""
    rng = np.random.default_rng(12)
    base = rng.random(NUM_FEATURES)
    z_train = np.array([state_summary(ex.events) for ex in _labelled_world(300, rng, base)])
    z_dev = np.array([state_summary(ex.events) for ex in _labelled_world(200, rng, base + 0.02)])
    renamed = [n.replace("_available", "_known") for n in SCHEMA_NAMES]  # no availability column: no groups
    with_groups = RobustGuard.fit(SCHEMA_NAMES, z_train, z_dev)
    plain = RobustGuard.fit(renamed, z_train, z_dev)
    assert with_groups.mask_thresholds and not plain.mask_thresholds
    assert with_groups.threshold == plain.threshold and with_groups.columns == plain.columns
    states = [*z_dev, *(z + rng.normal(0, 0.3, NUM_FEATURES) for z in z_dev)]  # accepted and flagged ones
    half = np.array(states[0])
    half[APP[0]] = 0.5  # app labels on half the events: the group is (partly) available
    for z in [*states, half]:
        assert with_groups.pattern(z) == ""
        assert with_groups.is_ood(z) == plain.is_ood(z)
    assert 0 < np.mean([plain.is_ood(z)[0] for z in states]) < 1


def test_mask_thresholds_round_trip_and_old_guards_load_as_before(app_guard):
    guard, _, dev = app_guard
    z = state_summary(_without(_typical(guard, dev).events))
    again = load_guard(guard.to_json(), guard.features)
    assert isinstance(again, RobustGuard)
    assert dict(again.mask_thresholds) == dict(guard.mask_thresholds)
    assert dict(again.mask_groups) == dict(guard.mask_groups)
    assert again.judge(z) == guard.judge(z) and again.threshold == guard.threshold
    old = json.loads(guard.to_json())
    del old["mask_groups"], old["mask_thresholds"]  # a guard stored before mask patterns
    legacy = load_guard(json.dumps(old), guard.features)
    assert isinstance(legacy, RobustGuard) and not legacy.mask_thresholds
    assert legacy.judge(z) == ("", guard.distance(z), guard.threshold)  # judged on every column, as today
    assert legacy.is_ood(z)[0]
    bad = {**json.loads(guard.to_json()), "mask_thresholds": {"audio": 3.0}}
    with pytest.raises(SelectorError, match=r"mask_thresholds .* name groups \['audio'\]"):
        load_guard(json.dumps(bad), guard.features)


def test_decisions_without_app_labels_say_the_pattern_they_were_judged_under(trained):
    """The deployed allocator judging with the model's guard (the guard before try 2; the default's judges
    only after its refit): app labels removed from every step -> ``ood_masked: "app"`` in the record."""
    from selector_synth import make_trajectories

    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.selector.allocator import SelectorAllocator

    _, out, _ = trained
    sel = SelectorAllocator(out, min_gain=0, **GUARD_BEFORE_TRY2)
    assert "app" in sel.model.ood.mask_thresholds  # the stand-in world's app columns vary in training
    (traj, *_), _ = make_trajectories(1, length=14, seed=22)
    bare = dataclasses.replace(traj, steps=tuple(dataclasses.replace(s, app=None) for s in traj.steps))
    for t in (8, 12):
        with_labels = sel.allocate(AllocationContext(traj.trace_at(t), 2, witness=traj.steps[t - 1].action))
        without = sel.allocate(AllocationContext(bare.trace_at(t), 2, witness=bare.steps[t - 1].action))
        assert "ood_masked" not in with_labels.info and "ood_distance" in with_labels.info
        assert without.info["ood_masked"] == "app"
