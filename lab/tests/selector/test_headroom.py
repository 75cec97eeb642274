"""The headroom gate (``train.fine_tune_headroom``): the base's share of the label oracle's budgeted value."""

from __future__ import annotations

import numpy as np
import pytest
from example_splits import SMOKE

from causalcache_lab.selector.headroom import headroom_share, no_room
from causalcache_memory.errors import ConfigError


def test_the_share_is_the_base_value_over_the_oracles_with_guarded_states_worth_nothing() -> None:
    oracle = np.array([2.0, 0.0, 4.0, 0.0])  # mean 1.5
    base = np.array([1.0, 0.0, 2.0, 0.0])  # mean 0.75
    assert headroom_share(oracle, base, None) == {"share": 0.5, "base": 0.75, "oracle": 1.5, "flagged": 0.0}
    guarded = headroom_share(oracle, base, np.array([False, False, True, False]))
    assert guarded["base"] == 0.25 and guarded["share"] == pytest.approx(1 / 6) and guarded["flagged"] == 0.25
    # nothing to gain on the labels: the base has all the room there is
    assert headroom_share(np.zeros(4), base, None)["share"] == 1.0


def test_the_interval_resamples_whole_trajectories() -> None:
    # every trajectory realizes half of its room: any draw of them gives 0.5, so the interval is a point
    oracle, base = np.array([2.0, 0.0, 4.0, 6.0]), np.array([1.0, 0.0, 2.0, 3.0])
    room = headroom_share(oracle, base, None, ["a", "a", "b", "c"], seed=1)
    assert room["ci"] == [pytest.approx(0.5), pytest.approx(0.5)] and room["clusters"] == 3
    # one trajectory holds all the base's value, the other none: the draws spread from 0 to 1
    half = np.repeat([1.0, 0.0], 10)  # 20 states with room 1 each; the base takes the first 10
    spread = headroom_share(np.ones(20), half, None, ["a"] * 10 + ["b"] * 10, seed=1)
    assert spread["share"] == 0.5 and spread["ci"][0] == 0.0 and spread["ci"][1] == 1.0
    # the same states drawn one by one narrow it: the clusters are what the draw keeps together
    single = headroom_share(np.ones(20), half, None, [str(i) for i in range(20)], seed=1)
    assert 0.1 < single["ci"][0] < 0.5 < single["ci"][1] < 0.9
    with pytest.raises(ValueError, match="clusters has 2 keys for 4 pool states"):
        headroom_share(oracle, base, None, ["a", "b"])


def test_the_gate_acts_on_the_lower_end_not_on_the_point_share() -> None:
    room = {"share": 0.45, "ci": [0.31, 0.59]}
    assert not no_room(room, 0.37)  # the point share is over the limit, the interval is not
    assert no_room({"share": 0.55, "ci": [0.41, 0.69]}, 0.37)
    assert no_room({"share": 0.37, "ci": [0.37, 0.37]}, 0.37)  # at the limit counts, as share >= h did


def test_the_share_refuses_mismatched_arrays() -> None:
    with pytest.raises(ValueError, match="base_values has shape"):
        headroom_share(np.ones(3), np.ones(2), None)
    with pytest.raises(ValueError, match="flagged has shape"):
        headroom_share(np.ones(3), np.ones(3), np.ones(2, bool))
    with pytest.raises(ValueError, match="at least one pool state"):
        headroom_share(np.zeros(0), np.zeros(0), None)


def test_the_gate_needs_cross_fitting_and_a_share_in_zero_one() -> None:
    from causalcache_lab.selector.train_config import TrainConfig

    with pytest.raises(ConfigError, match=r"train\.fine_tune_headroom=0\.4 .*set train\.cross_fit"):
        TrainConfig(init_from="bundled", fine_tune_headroom=0.4)
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match=rf"train\.fine_tune_headroom={bad}"):
            TrainConfig(init_from="bundled", cross_fit=5, fine_tune_headroom=bad)


torch = pytest.importorskip("torch")

from causalcache_lab.selector.train import TrainConfig, train_selector  # noqa: E402


def _cfg(base_dir, limit: float) -> TrainConfig:
    return TrainConfig(
        init_from=str(base_dir), cross_fit=3, cross_fit_epochs=2, lr=0.01, split_by="metadata",
        fine_tune_gate=None, fine_tune_headroom=limit, **SMOKE,
    )  # fmt: skip


def _no_harm(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import causalcache_lab.selector.cross_fit as cross_module

    evidence = lambda t, b, **kw: {"keep": False, "ci": [-1.0, 1.0], "delta": 0.0, "groups": len(t), **kw}  # noqa: E731
    monkeypatch.setattr(cross_module, "fine_tune_evidence", evidence)


def test_a_base_with_room_is_fine_tuned_and_one_without_ships_unchanged(
    trained, bad_base, monkeypatch, caplog
) -> None:
    _no_harm(monkeypatch)  # neither shown harmful: only the headroom gate decides
    data, _, bad_dir = bad_base
    good_dir = trained[1]  # trained on the labels' own targets: it already ranks the swaps well
    bad = train_selector(data, _cfg(bad_dir, 1.0), export_onnx=False).metadata
    good = train_selector(data, _cfg(good_dir, 1.0), export_onnx=False).metadata
    room_bad, room_good = (m["init_from"]["gate"]["headroom"] for m in (bad, good))
    assert room_bad["oracle"] == room_good["oracle"] > 0  # one pool, one oracle
    assert room_bad["share"] < room_good["share"]  # the negated base takes less of it
    assert bad["best_epoch"] == 2 and not room_bad["no_room"]
    # a limit just under the lower end of the good base's share keeps it unchanged; the bad base is still
    # fine-tuned, and so is the good one at a limit between its lower end and its point share
    assert room_good["ci"][0] < room_good["share"] and room_good["clusters"] > 1
    limit = room_good["ci"][0] - 1e-6
    assert room_bad["ci"][0] < room_bad["share"] < limit
    between = (room_good["ci"][0] + room_good["share"]) / 2
    assert train_selector(data, _cfg(good_dir, between), export_onnx=False).metadata["best_epoch"] == 2
    with caplog.at_level("INFO", logger="causalcache_lab.selector.cross_fit"):
        kept = train_selector(data, _cfg(good_dir, limit), export_onnx=False).metadata
    assert kept["best_epoch"] == kept["init_from"]["epochs_fine_tuned"] == 0
    assert kept["init_from"]["gate"]["headroom"]["no_room"] and kept["cross_fit"]["epoch"] == 2
    assert "of the label oracle's budgeted value" in caplog.text and "no room" in caplog.text
    still = train_selector(data, _cfg(bad_dir, limit), export_onnx=False).metadata
    assert still["best_epoch"] == 2


def test_the_share_ranks_the_base_and_the_oracle_over_the_whole_pool(trained, bad_base, monkeypatch) -> None:
    import causalcache_lab.selector.cross_fit as cross_module

    _no_harm(monkeypatch)
    seen: dict[str, object] = {}
    ranked, share = cross_module.fold_budgeted_values, cross_module.headroom_share

    def spy_ranked(diffs, examples, folds):  # type: ignore[no-untyped-def]
        seen.setdefault("epoch0", (diffs, examples, folds))  # the first scoring is the base's
        return ranked(diffs, examples, folds)

    def spy_share(oracle, base, flagged, clusters, **kw):  # type: ignore[no-untyped-def]
        seen.update(oracle=oracle, base=base)
        return share(oracle, base, flagged, clusters, **kw)

    monkeypatch.setattr(cross_module, "fold_budgeted_values", spy_ranked)
    monkeypatch.setattr(cross_module, "headroom_share", spy_share)
    train_selector(bad_base[0], _cfg(trained[1], 1.0), export_onnx=False)
    diffs, pool, folds = seen["epoch0"]
    labels = [ex.y for ex in pool]
    # the base is one model: its predictions and the labels are ranked over all pool states at once
    np.testing.assert_array_equal(seen["oracle"], cross_module.budgeted_values(labels, pool))
    np.testing.assert_array_equal(seen["base"], cross_module.budgeted_values(diffs, pool))
    assert seen["oracle"].sum() > 0
    # which is not what ranking fold by fold gives on this pool (each fold's own 15% budget)
    assert (ranked(labels, pool, folds) != seen["oracle"]).any()


def test_the_base_guard_is_read_once_when_the_gate_ships_the_base(trained, bad_base, monkeypatch) -> None:
    import causalcache_lab.selector.keep_base as keep_module
    import causalcache_lab.selector.train as train_module
    from causalcache_lab.selector.keep_base import base_calibration

    _no_harm(monkeypatch)
    reads = []
    read = keep_module.base_guard_flags

    def counted(path, states):  # type: ignore[no-untyped-def]
        reads.append(len(states))
        return read(path, states)

    monkeypatch.setattr(keep_module, "base_guard_flags", counted)
    monkeypatch.setattr(train_module, "base_guard_flags", counted)
    kept = train_selector(bad_base[0], _cfg(trained[1], 1e-9), export_onnx=False).metadata  # no room
    assert kept["best_epoch"] == 0 and kept["init_from"]["gate"]["headroom"]["no_room"]
    assert kept["init_from"]["base_calibration"]["kept"] and len(reads) == 1  # the gate's read, reused
    parts = {"train": [], "dev": bad_base[0][:3]}
    with pytest.raises(ValueError, match="guard has 2 verdicts for 3 train and dev states"):
        base_calibration(trained[1] / "selector.onnx", parts, (np.zeros(2, bool), {}))
