"""Cross-fitted fine-tuning (``train.cross_fit``): budgeted value, folds, the clustered gate, the shipped model."""

from __future__ import annotations

import numpy as np
import pytest
from example_splits import SMOKE

from causalcache_lab.selector.cross_fit import budgeted_values, fold_budgeted_values, fold_of
from causalcache_lab.selector.examples import StateExample
from causalcache_lab.selector.fine_tune_gate import fine_tune_evidence


def _state(y: float, budget: int = 4, *, swap: bool = True) -> StateExample:
    """One state with one group out of Recent-B: entry 0 keeps ``r`` (y 0), entry 1 swaps in (label ``y``)."""
    return StateExample(
        trajectory_id="t",
        t=9,
        budget=budget,
        events=np.zeros((3, 1), np.float32),
        context=np.zeros((1, 1), np.float32),
        conds=[(1, 2)],
        group=np.array([0, 0]),
        cand=np.array([2, 1 if swap else 2]),
        out=np.array([2, 2]),
        y=np.array([0.0, y]),
        from_recent=np.array([True]),
    )


def test_budgeted_value_counts_only_the_top_share_with_a_positive_predicted_gain() -> None:
    ys = [5.0, -2.0, 3.0, 7.0, 1.0, 4.0, -1.0, 2.0, 6.0, 0.5]
    gains = [0.9, 0.8, -0.1, 0.7, 0.1, 0.2, 0.3, 0.05, -0.5, 0.01]
    states = [_state(y) for y in ys]
    diffs = [np.array([0.0, g]) for g in gains]
    v = budgeted_values(diffs, states, budget=0.3)  # m = 3: the three largest gains, all positive
    expected = np.zeros(10)
    expected[[0, 1, 3]] = [5.0, -2.0, 7.0]
    np.testing.assert_array_equal(v, expected)
    # a budget larger than the positive gains admits none of the non-positive ones
    v_all = budgeted_values(diffs, states, budget=1.0)
    assert set(np.flatnonzero(v_all)) == {i for i, g in enumerate(gains) if g > 0}
    assert budgeted_values(diffs, states, budget=0.05).sum() == 0.0  # m = 0: nothing fires


def test_budgeted_value_holds_the_budget_per_memory_budget_and_skips_states_without_a_swap() -> None:
    states = [_state(1.0, 2), _state(2.0, 2), _state(3.0, 4), _state(4.0, 4), _state(9.0, 4, swap=False)]
    diffs = [np.array([0.0, g]) for g in (0.5, 0.6, 0.2, 0.1, 5.0)]
    v = budgeted_values(diffs, states, budget=0.5)  # one of two per B; the swap-less state never fires
    np.testing.assert_array_equal(v, [0.0, 2.0, 3.0, 0.0, 0.0])


def test_fold_budgeted_values_rank_each_fold_within_its_own_budget() -> None:
    # fold 0 holds ten states whose swaps all gain (labels 10..1), fold 1 ten that gain nothing
    states = [_state(float(y)) for y in range(10, 0, -1)] + [_state(0.0) for _ in range(10)]
    labels = [ex.y for ex in states]
    folds = np.repeat([0, 1], 10)
    pooled = budgeted_values(labels, states)  # the 15% budget over 20 states: the top 3 of fold 0
    np.testing.assert_array_equal(np.flatnonzero(pooled), [0, 1, 2])
    by_fold = fold_budgeted_values(labels, states, folds)  # 15% of each fold's 10: one state, if it gains
    np.testing.assert_array_equal(by_fold, np.r_[10.0, np.zeros(19)])
    # one fold is the pool itself
    np.testing.assert_array_equal(fold_budgeted_values(labels, states, np.zeros(20, int)), pooled)
    with pytest.raises(ValueError, match=r"20 examples, folds of shape \(19,\), 20 diffs"):
        fold_budgeted_values(labels, states, np.zeros(19, int))


def test_folds_are_stable_and_cover_every_fold() -> None:
    ids = [f"thread-{i}" for i in range(200)]
    folds = [fold_of(i, 5) for i in ids]
    assert folds == [fold_of(i, 5) for i in ids] and set(folds) == set(range(5))
    assert max(np.bincount(folds)) < 60  # near-even for 200 trajectories
    assert [fold_of(i, 5, "other") for i in ids] != folds  # the salt redraws them


def test_the_clustered_gate_is_wider_when_a_trajectorys_states_move_together() -> None:
    rng = np.random.default_rng(0)
    per_traj = rng.normal(0.2, 1.0, size=20)  # one shared difference per trajectory, 25 states each
    diff = np.repeat(per_traj, 25)
    clusters = np.repeat([f"t{i}" for i in range(20)], 25).tolist()
    iid = fine_tune_evidence(diff, np.zeros_like(diff), confidence=0.95, seed=0)
    clustered = fine_tune_evidence(diff, np.zeros_like(diff), confidence=0.95, seed=0, clusters=clusters)
    width = lambda e: e["ci"][1] - e["ci"][0]  # noqa: E731
    assert clustered["clusters"] == 20 and width(clustered) > 3 * width(iid)
    assert clustered["delta"] == pytest.approx(iid["delta"])
    with pytest.raises(ValueError, match="clusters has 3 keys"):
        fine_tune_evidence(diff, np.zeros_like(diff), confidence=0.95, seed=0, clusters=["a", "b", "c"])


def test_cross_fit_needs_a_base_and_one_scorer() -> None:
    from causalcache_lab.selector.train_config import TrainConfig
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.cross_fit=5 .*train\.init_from \(got None\)"):
        TrainConfig(cross_fit=5)
    with pytest.raises(ConfigError, match=r"train\.cross_fit"):
        TrainConfig(cross_fit=1, init_from="bundled")
    with pytest.raises(ConfigError, match=r"train\.ensemble: 1 \(got 3\)"):
        TrainConfig(cross_fit=3, init_from="bundled", ensemble=3)


torch = pytest.importorskip("torch")

from causalcache_lab.selector.train import TrainConfig, train_selector  # noqa: E402


def test_a_cross_fitted_fine_tune_of_a_bad_base_ships_and_calibrates_out_of_fold(
    bad_base, tmp_path, caplog
) -> None:
    data, _, bad_dir = bad_base
    cfg = TrainConfig(init_from=str(bad_dir), cross_fit=3, epochs=6, lr=0.01, split_by="metadata", **SMOKE)
    with caplog.at_level("INFO", logger="causalcache_lab.selector.cross_fit"):
        tuned = train_selector(data, cfg, output_dir=tmp_path / "tuned")
    meta = tuned.metadata
    gate = meta["init_from"]["gate"]
    assert "cross-fit (3 folds" in caplog.text and "out-of-fold budgeted gain" in caplog.text
    assert gate["value"] == "budgeted" and gate["keep"] and gate["ci"][0] > 0
    assert gate["groups"] == len(data) and gate["clusters"] == len({e.trajectory_id for e in data})
    assert meta["best_epoch"] == meta["init_from"]["epochs_fine_tuned"] == gate["epoch"] > 0
    assert meta["cross_fit"] == {"folds": 3, "epoch": gate["epoch"], "pool": "train+dev"}
    assert meta["calibration"]["split"] == "train+dev, out of fold"
    values = [h["budgeted_value"] for h in meta["history"]]
    assert values[gate["epoch"]] == max(values) > values[0]
    assert (tmp_path / "tuned" / "selector.onnx").is_file()


def test_without_a_shown_gain_cross_fitting_ships_the_base(bad_base, tmp_path, monkeypatch) -> None:
    import causalcache_lab.selector.cross_fit as cross_module

    data, _, bad_dir = bad_base
    monkeypatch.setattr(
        cross_module,
        "fine_tune_evidence",
        lambda t, b, **kw: {"keep": False, "ci": [-1.0, 1.0], "delta": 0.0, "groups": len(t)},
    )
    cfg = TrainConfig(init_from=str(bad_dir), cross_fit=3, epochs=6, lr=0.01, split_by="metadata", **SMOKE)
    shipped = train_selector(data, cfg, export_onnx=False)
    assert shipped.metadata["best_epoch"] == 0 and shipped.metadata["cross_fit"]["epoch"] > 0
    from causalcache_lab.selector.base_model import load_base
    from causalcache_lab.selector.model import ScorerConfig

    base = load_base(str(bad_dir), ScorerConfig())
    for name, value in base.member_state(0).items():
        torch.testing.assert_close(shipped.model.state_dict()[name], value, rtol=0, atol=0)


def test_without_a_gate_the_best_out_of_fold_epoch_ships_whatever_the_evidence(bad_base, monkeypatch) -> None:
    import causalcache_lab.selector.cross_fit as cross_module

    data, _, bad_dir = bad_base
    monkeypatch.setattr(
        cross_module,
        "fine_tune_evidence",
        lambda t, b, **kw: {"keep": False, "ci": [-1.0, 1.0], "delta": 0.0, "groups": len(t), **kw},
    )
    cfg = TrainConfig(
        init_from=str(bad_dir),
        cross_fit=3,
        epochs=6,
        lr=0.01,
        split_by="metadata",
        fine_tune_gate=None,
        **SMOKE,
    )
    meta = train_selector(data, cfg, export_onnx=False).metadata
    assert meta["best_epoch"] == meta["cross_fit"]["epoch"] > 0
    assert meta["init_from"]["gate"]["confidence"] == 0.95  # reported at 95%, not gating


def test_a_fixed_length_needs_cross_fitting() -> None:
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.cross_fit_epochs=4 .*set train\.cross_fit"):
        TrainConfig(init_from="bundled", cross_fit_epochs=4)
    with pytest.raises(ConfigError, match=r"train\.cross_fit_epochs"):
        TrainConfig(init_from="bundled", cross_fit=5, cross_fit_epochs=0)


def _fixed(bad_dir, epochs: int = 3) -> TrainConfig:
    return TrainConfig(
        init_from=str(bad_dir), cross_fit=3, cross_fit_epochs=epochs, epochs=40, lr=0.01,
        split_by="metadata", fine_tune_gate=None, **SMOKE,
    )  # fmt: skip


def _evidence(ci: list[float]):  # type: ignore[no-untyped-def]
    return lambda t, b, **kw: {"keep": ci[0] > 0, "ci": ci, "delta": sum(ci) / 2, "groups": len(t), **kw}


@pytest.mark.parametrize("ci", [[-1.0, 1.0], [0.5, 1.0]])
def test_a_fixed_length_ships_its_epoch_unless_shown_harmful(bad_base, monkeypatch, ci) -> None:
    import causalcache_lab.selector.cross_fit as cross_module

    data, _, bad_dir = bad_base
    monkeypatch.setattr(cross_module, "fine_tune_evidence", _evidence(ci))
    meta = train_selector(data, _fixed(bad_dir, 3), export_onnx=False).metadata
    gate = meta["init_from"]["gate"]
    assert meta["best_epoch"] == meta["cross_fit"]["epoch"] == gate["epoch"] == 3
    assert [h["epoch"] for h in meta["history"]] == [0, 1, 2, 3]  # exactly 3 epochs, whatever the curve
    assert gate["length"] == "fixed" and not gate["harmful"]
    assert meta["calibration"]["split"] == "train+dev, out of fold"


def test_a_fixed_length_shown_harmful_out_of_fold_ships_the_base(bad_base, monkeypatch, caplog) -> None:
    import causalcache_lab.selector.cross_fit as cross_module

    data, _, bad_dir = bad_base
    monkeypatch.setattr(cross_module, "fine_tune_evidence", _evidence([-0.3, -0.1]))
    with caplog.at_level("INFO", logger="causalcache_lab.selector.cross_fit"):
        meta = train_selector(data, _fixed(bad_dir, 2), export_onnx=False).metadata
    assert meta["best_epoch"] == meta["init_from"]["epochs_fine_tuned"] == 0
    assert meta["cross_fit"]["epoch"] == 2 and meta["init_from"]["gate"]["harmful"]
    assert "epoch 2 (fixed length)" in caplog.text and "the base is kept" in caplog.text


def test_a_fixed_length_with_a_gate_needs_the_gain_shown(bad_base, monkeypatch) -> None:
    import causalcache_lab.selector.cross_fit as cross_module

    data, _, bad_dir = bad_base
    monkeypatch.setattr(cross_module, "fine_tune_evidence", _evidence([-0.1, 0.4]))
    cfg = _fixed(bad_dir, 2).model_copy(update={"fine_tune_gate": 0.95})
    meta = train_selector(data, cfg, export_onnx=False).metadata
    assert meta["best_epoch"] == 0 and not meta["init_from"]["gate"]["harmful"]


def test_blend_states_interpolates_floating_point_entries_only() -> None:
    from causalcache_lab.selector.cross_fit import blend_states

    base = {"w": torch.tensor([0.0, 2.0]), "steps": torch.tensor([3])}
    tuned = {"w": torch.tensor([4.0, -2.0]), "steps": torch.tensor([7])}
    mid = blend_states(base, tuned, 0.5)
    torch.testing.assert_close(mid["w"], torch.tensor([2.0, 0.0]))
    assert mid["steps"].item() == 7  # integer entries are the fine-tune's
    torch.testing.assert_close(blend_states(base, tuned, 0.25)["w"], torch.tensor([1.0, 1.0]))
    assert blend_states(base, tuned, 1.0) is tuned


def test_a_blend_needs_cross_fitting_and_a_weight_in_zero_one() -> None:
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.fine_tune_blend=0\.5 .*set train\.cross_fit"):
        TrainConfig(init_from="bundled", fine_tune_blend=0.5)
    for bad in (0.0, 1.5):
        with pytest.raises(ConfigError, match=rf"train\.fine_tune_blend={bad}"):
            TrainConfig(init_from="bundled", cross_fit=5, fine_tune_blend=bad)


def test_a_blended_fine_tune_ships_the_interpolation_and_is_checked_as_blended(
    bad_base, monkeypatch, caplog
) -> None:
    import causalcache_lab.selector.cross_fit as cross_module
    from causalcache_lab.selector.base_model import load_base
    from causalcache_lab.selector.model import ScorerConfig

    data, _, bad_dir = bad_base
    monkeypatch.setattr(cross_module, "fine_tune_evidence", _evidence([-1.0, 1.0]))
    full = train_selector(data, _fixed(bad_dir, 2), export_onnx=False)
    with caplog.at_level("INFO", logger="causalcache_lab.selector.cross_fit"):
        half = train_selector(
            data, _fixed(bad_dir, 2).model_copy(update={"fine_tune_blend": 0.5}), export_onnx=False
        )
    base = load_base(str(bad_dir), ScorerConfig()).member_state(0)
    tuned = full.model.state_dict()
    for name, value in half.model.state_dict().items():  # θ_base + 0.5 (θ_tuned − θ_base), entry by entry
        torch.testing.assert_close(value, base[name] + 0.5 * (tuned[name] - base[name]))
    assert any(not torch.equal(half.model.state_dict()[n], tuned[n]) for n in tuned)
    gate = half.metadata["init_from"]["gate"]
    assert gate["blend"] == 0.5 and full.metadata["init_from"]["gate"]["blend"] == 1.0
    assert "blended with the base at 0.5" in caplog.text
    # the out-of-fold check scores the blend: the base (epoch 0) is shared, the fine-tuned epochs are not
    h_full = [h["budgeted_value"] for h in full.metadata["history"]]
    h_half = [h["budgeted_value"] for h in half.metadata["history"]]
    assert h_half[0] == h_full[0] and h_half[1:] != h_full[1:]


def test_an_anchored_fine_tune_raises_unhelped_states_less_above_the_base(bad_base) -> None:
    from causalcache_lab.selector.base_model import load_base
    from causalcache_lab.selector.model import ScorerConfig, SetScorerModel
    from causalcache_lab.selector.train import _state_diffs

    data, _, bad_dir = bad_base
    base = SetScorerModel(ScorerConfig())
    base.load_state_dict(load_base(str(bad_dir), ScorerConfig()).member_state(0))
    base.eval()
    cfg = _fixed(bad_dir, 3).model_copy(update={"loss": "decision", "decision_min_gain": 0.5})

    def rise(weight: float) -> float:  # mean rise of unhelped states' top predicted gain over the base's
        tuned = train_selector(
            data, cfg.model_copy(update={"decision_anchor_weight": weight}), export_onnx=False
        )
        scale = tuned.metadata["target_scale"]
        out = []
        for ex, d, b in zip(data, _state_diffs(tuned.model, data), _state_diffs(base, data), strict=True):
            swap = ex.from_recent[ex.group] & (ex.cand != ex.out)
            if swap.any() and ex.y[swap].max() <= 0.5 * scale:
                out.append(max(d[swap].max() - b[swap].max(), 0.0))
        assert out
        return float(np.mean(out))

    free, held = rise(0.0), rise(30.0)
    assert held < 0.5 * free


def test_soup_states_is_the_uniform_mean_of_floating_point_entries() -> None:
    from causalcache_lab.selector.cross_fit import soup_states

    states = [
        {"w": torch.tensor([0.0, 3.0]), "n": torch.tensor([1])},
        {"w": torch.tensor([3.0, 0.0]), "n": torch.tensor([5])},
    ]
    states.append({"w": torch.tensor([6.0, 6.0]), "n": torch.tensor([9])})
    soup = soup_states(states)
    torch.testing.assert_close(soup["w"], torch.tensor([3.0, 3.0]))
    assert soup["n"].item() == 1  # integer entries are the first state's


def test_a_soup_needs_a_fixed_length_cross_fit() -> None:
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"fine_tune_soup .*train\.cross_fit \(got None\)"):
        TrainConfig(init_from="bundled", fine_tune_soup=True)
    with pytest.raises(ConfigError, match=r"train\.cross_fit_epochs \(got None\)"):
        TrainConfig(init_from="bundled", cross_fit=5, fine_tune_soup=True)
    TrainConfig(init_from="bundled", cross_fit=5, cross_fit_epochs=4, fine_tune_soup=True)  # accepted


def test_a_souped_fine_tune_ships_the_mean_of_the_final_model_and_its_fold_copies(
    bad_base, monkeypatch
) -> None:
    import causalcache_lab.selector.cross_fit as cross_module
    import causalcache_lab.selector.train as train_module

    data, _, bad_dir = bad_base
    monkeypatch.setattr(cross_module, "fine_tune_evidence", _evidence([-1.0, 1.0]))
    seen: list = []
    real = train_module.cross_fit

    def spy(*args, **kwargs):  # keep what cross-fitting returned, to rebuild the soup by hand
        out = real(*args, **kwargs)
        seen.append(out)
        return out

    monkeypatch.setattr(train_module, "cross_fit", spy)
    plain = train_selector(data, _fixed(bad_dir, 2), export_onnx=False)
    souped = train_selector(
        data, _fixed(bad_dir, 2).model_copy(update={"fine_tune_soup": True}), export_onnx=False
    )
    folds = seen[-1].fold_states
    assert len(folds) == seen[-1].folds >= 2
    final = plain.model.state_dict()  # same seed and data: the final fine-tune before the soup
    for name, value in souped.model.state_dict().items():
        expected = (final[name] + sum(f[name] for f in folds)) / (len(folds) + 1)
        torch.testing.assert_close(value, expected)
    assert any(not torch.equal(souped.model.state_dict()[n], final[n]) for n in final)
