from __future__ import annotations

import dataclasses
import hashlib

import numpy as np
import pytest
from selector_synth import FakeThumbs, make_trajectories

from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_memory.actions import Action
from causalcache_memory.selector import features as F
from causalcache_memory.selector import schema as S
from causalcache_memory.selector.features import FEATURE_SCHEMA, FeatureExtractor, feature_index, schema_hash

WITNESS_COLUMNS = {
    "witness_present",
    "next_match",
    "next_type_match",
    "own_match",
    "own_type_match",
    "next_point_dist",
    "ref_token_jaccard",
    "ref_char_jaccard",
    "next_ref_token_jaccard",
} | {f"witness_type_{name}" for name, _ in F.TYPE_GROUPS}


def test_schema_is_documented_unique_and_hashed():
    names = [n for n, _ in FEATURE_SCHEMA]
    assert len(names) == len(set(names)) and all(d for _, d in FEATURE_SCHEMA)
    h = schema_hash()
    assert len(h) == 16 and h == schema_hash()
    assert WITNESS_COLUMNS <= set(names)


def test_schema_hash_changes_with_names(monkeypatch):
    before = schema_hash()
    monkeypatch.setattr(S, "FEATURE_SCHEMA", (*FEATURE_SCHEMA, ("extra", "x")))
    assert schema_hash() != before


def _branch(traj: Trajectory, t: int, seed: int) -> Trajectory:
    """Same steps before t; a different target and a different future from step t on."""
    rng = np.random.default_rng(seed)
    steps = list(traj.steps[: t - 1])
    prev = traj.steps[t - 2].screenshot_after
    for k in range(t - 1, len(traj.steps) + 3):
        a = (
            Action("type", text=f"future {seed} {k}")
            if k % 2
            else Action("click", x=float(rng.random()), y=0.5)
        )
        nxt = hashlib.sha256(f"branch{seed}:{k}".encode()).hexdigest()
        steps.append(Step(a, f"r{seed}{k}", prev, nxt, app="Other"))
        prev = nxt
    return dataclasses.replace(traj, steps=tuple(steps))


@pytest.mark.parametrize("t", [3, 8, 13])
def test_features_never_read_the_future(world, t):
    traj = world[0][0]
    a, b = _branch(traj, t, 1), _branch(traj, t, 2)
    assert a.steps[t - 1].action != b.steps[t - 1].action
    ext = FeatureExtractor(FakeThumbs())
    for budget in (1, 2, 4):
        fa = ext(a.trace_at(t), budget, None)
        fb = ext(b.trace_at(t), budget, None)
        np.testing.assert_array_equal(fa, fb)
        assert fa.shape == (t - 1, len(FEATURE_SCHEMA))
        # with the gold target as witness, only witness columns may differ
        ga = ext(a.trace_at(t), budget, a.steps[t - 1].action)
        gb = ext(b.trace_at(t), budget, b.steps[t - 1].action)
        differs = {FEATURE_SCHEMA[i][0] for i in np.flatnonzero(np.any(ga != gb, axis=0))}
        assert differs <= WITNESS_COLUMNS


def test_next_action_match_marks_the_event_before_a_repeat():
    trajs, _ = make_trajectories(1, length=30, seed=3)
    traj = trajs[0]
    ext = FeatureExtractor()
    hits = 0
    for t in range(8, 31):
        target = traj.steps[t - 1].action
        f = ext(traj.trace_at(t), 2, target)
        nm = f[:, feature_index("next_match")]
        expect = [j for j in range(1, t - 1) if traj.steps[j].action == target]  # a_{j+1} == target
        assert sorted(int(j) + 1 for j in np.flatnonzero(nm)) == expect
        assert f[-1, feature_index("next_available")] == 0 and nm[-1] == 0
        hits += bool(expect)
    assert hits > 3


def test_recency_features():
    traj = make_trajectories(1, length=12)[0][0]
    f = FeatureExtractor()(traj.trace_at(10), 3, None)  # events 1..9, Recent-3 = {7, 8, 9}
    assert list(np.flatnonzero(f[:, feature_index("in_recent")]) + 1) == [7, 8, 9]
    assert list(np.flatnonzero(f[:, feature_index("is_oldest_recent")]) + 1) == [7]
    np.testing.assert_allclose(f[6:, feature_index("recent_rank")], [1.0, 2 / 3, 1 / 3], rtol=1e-6)


def test_incremental_cache_matches_fresh_extraction():
    traj = make_trajectories(1, length=20)[0][0]
    from causalcache_memory.trace import Trace

    trace = Trace(traj.goal)
    trace.observe(traj.steps[0].screenshot_before)
    ext = FeatureExtractor(FakeThumbs())
    for t, step in enumerate(traj.steps[:-1], 1):
        trace.record(step.action, step.response, step.screenshot_after, app=step.app)
        w = traj.steps[t].action
        np.testing.assert_array_equal(ext(trace, 4, w), FeatureExtractor(FakeThumbs())(trace, 4, w))


def test_image_features_need_thumbnails_and_drop_features():
    traj = make_trajectories(1, length=10)[0][0]
    trace = traj.trace_at(9)
    with_img = FeatureExtractor(FakeThumbs())(trace, 2, None)
    without = FeatureExtractor()(trace, 2, None)
    col = feature_index("image_dist_current")
    assert np.all(with_img[:, feature_index("image_available")] == 1) and np.all(with_img[:-1, col] > 0)
    assert with_img[-1, col] == 0  # v_{t-1} is the current screen x_t
    assert np.all(without[:, col] == 0)
    dropped = FeatureExtractor(drop_features=["in_recent"])(trace, 2, None)
    assert np.all(dropped[:, feature_index("in_recent")] == 0)


def test_thousand_event_trace_is_featurized():
    traj = make_trajectories(1, length=1001, seed=5)[0][0]
    f = FeatureExtractor(FakeThumbs())(traj.trace_at(1001), 4, traj.steps[1000].action)
    assert f.shape == (1000, len(FEATURE_SCHEMA)) and f.dtype == np.float32 and np.isfinite(f).all()


def test_app_features_are_masked_where_app_labels_are_missing():
    traj = make_trajectories(1, length=12)[0][0]
    ext = FeatureExtractor()
    full = ext(traj.trace_at(12), 2, None)
    cols = [feature_index(n) for n in ("app_in_goal", "app_differs_current", "app_switch_after")]
    avail = feature_index("app_available")
    assert full[:, avail].all() and full[:, cols].any()
    # events 3 and 7 lose their app label (as in datasets without app metadata): masked, not guessed
    steps = list(traj.steps)
    for k in (2, 6):
        steps[k] = dataclasses.replace(steps[k], app=None)
    part = ext(dataclasses.replace(traj, steps=tuple(steps)).trace_at(12), 2, None)
    assert list(np.flatnonzero(part[:, avail] == 0) + 1) == [3, 7]
    assert not part[[2, 6]][:, cols].any()
    assert part[1, feature_index("app_switch_after")] == 0  # its successor (event 3) has no label
    np.testing.assert_array_equal(
        np.delete(part, [1, 2, 5, 6], axis=0), np.delete(full, [1, 2, 5, 6], axis=0)
    )
    # no labels at all: every app feature and the indicator are 0
    bare = [dataclasses.replace(s, app=None) for s in traj.steps]
    none = ext(dataclasses.replace(traj, steps=tuple(bare)).trace_at(12), 2, None)
    assert not none[:, [*cols, avail]].any()
