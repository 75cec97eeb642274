"""Calibration metadata (``min_gain: auto``), the OOD fallback, all-slot labels (issues 14, 24).

The pass-2 share rule is tested in test_selector_second_pass_share.py, the guard in test_selector_ood.py.
"""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_memory.allocation import AllocationContext, recent_b
from causalcache_memory.selector.ood import RobustGuard

onnx_mod = pytest.importorskip("onnxruntime")


def test_calibration_and_ood_metadata_round_trip(trained):
    from causalcache_lab.selector.calibrate import THRESHOLD_RULE
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    result, out, _ = trained
    meta = result.metadata
    on_disk = json.loads((out / "metadata.json").read_text())
    model = OnnxScorer(out)
    assert (
        model.calibration["min_gain"] == meta["calibration"]["min_gain"] == on_disk["calibration"]["min_gain"]
    )
    assert model.calibration["rule"] == THRESHOLD_RULE and model.calibrated_min_gain >= 0.0
    assert (
        model.calibration["frontier"] == on_disk["calibration"]["frontier"] == meta["calibration"]["frontier"]
    )
    assert model.calibration["second_pass_share"] == 0.15 >= model.calibration["dev_fire_rate"]
    assert isinstance(model.ood, RobustGuard) and model.ood.threshold == pytest.approx(
        meta["ood"]["threshold"]
    )
    np.testing.assert_allclose(model.ood.center, json.loads(meta["ood"]["guard"])["center"])
    assert model.ood.false_alarm_rate == meta["ood"]["false_alarm_rate"] == 0.01
    assert meta["ood"]["split"] == "dev" and 0.0 <= meta["ood"]["dev_flagged"] <= 0.01
    assert model.image_features is True


def test_auto_threshold_is_read_from_the_model(trained, tmp_path):
    onnx = pytest.importorskip("onnx")
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.config.models import AllocationConfig, SelectorConfig
    from causalcache_memory.selector.allocator import SelectorAllocator

    _, out, _ = trained
    calibrated = SelectorAllocator(out).model.calibrated_min_gain
    assert SelectorConfig().min_gain == "auto"
    assert SelectorAllocator(out).min_gain == calibrated
    assert SelectorAllocator(out, min_gain=0).min_gain == 0.0  # the paper's rule
    cfg = AllocationConfig(allocator="selector", selector={"model_path": str(out)})
    assert build_allocator(cfg).min_gain == calibrated
    # a model exported before calibration: auto falls back to the paper's rule and says so
    proto = onnx.load(str(out / "selector.onnx"))
    keep = [p for p in proto.metadata_props if p.key != "causalcache.calibration"]
    del proto.metadata_props[:]
    proto.metadata_props.extend(keep)
    old = tmp_path / "old.onnx"
    onnx.save(proto, str(old))
    sel = SelectorAllocator(old)
    assert sel.min_gain == 0.0 and "no calibration" in sel.min_gain_source


def test_a_higher_threshold_fires_less(trained):
    from causalcache_memory.selector.allocator import SelectorAllocator

    _, out, _ = trained
    trajs, _ = make_trajectories(4, length=14, seed=11)
    fired = {}
    for gain in (0.0, 1e6):
        sel = SelectorAllocator(out, min_gain=gain, ood_guard=False)
        fired[gain] = sum(
            not sel.allocate(AllocationContext(tr.trace_at(t), 2, witness=tr.steps[t - 1].action)).is_recent
            for tr in trajs
            for t in range(5, 15)
        )
    assert fired[0.0] > 0 and fired[1e6] == 0


def test_ood_fallback_has_reason_ood_in_the_decision_log(trained):
    from causalcache_memory import Action
    from causalcache_memory.controller import MemoryController
    from causalcache_memory.policy import Generation
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

    _, out, _ = trained

    class Fixed:
        name = "fixed"
        calls = 0

        def generate(self, prompt):
            self.calls += 1
            return Generation("click", Action("click", x=0.5, y=0.5))

        def score(self, prompts, targets):  # pragma: no cover - not used
            return [0.0] * len(prompts)

    trajs, _ = make_trajectories(1, length=14, seed=11)
    trace = trajs[0].trace_at(12)
    records = {}
    for name, scale in (("guarded", 1e-9), ("open", 1e9)):  # every state outside / inside the envelope
        policy = Fixed()
        # the model's guard on this first decision (the default's open warm-up would not judge it)
        sel = SelectorAllocator(out, ood_scale=scale, min_gain=0, **GUARD_BEFORE_TRY2)
        ctl = MemoryController(
            policy=policy, archive=DictArchive(), allocator=sel, budget=2, selector_timeout_s=None
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an OOD fallback is a decision, not a warning
            decision = ctl.decide(trace)
        records[name] = (decision.to_record(), policy.calls)
    guarded, calls = records["guarded"]
    assert guarded["fallback"] == "ood" and guarded["selected"] == list(recent_b(12, 2))
    assert guarded["second_pass"] is False and calls == 1  # no second model call
    assert guarded["min_gain"] == 0.0 and guarded["ood_distance"] > 0
    opened, _ = records["open"]
    assert opened["fallback"] is None and "predicted_gain" in opened


def test_labels_cover_every_recent_slot_by_default():
    from causalcache_lab.selector.labels import LabelConfig, label_state

    trajs, useful = make_trajectories(1, length=12, seed=4)
    config = LabelConfig(path_length=0)
    assert config.all_slots is True
    rec = label_state(MarkerPolicy(useful), DictArchive(), trajs[0], 10, 3, config)
    singles = [g for g in rec["groups"] if g["source"] == "singleton"]
    assert sorted(g["out"] for g in singles) == list(recent_b(10, 3))  # the newest slot included
    assert all(g["cands"] == list(range(1, 7)) for g in singles)
    old = label_state(
        MarkerPolicy(useful), DictArchive(), trajs[0], 10, 3, LabelConfig(path_length=0, all_slots=False)
    )
    assert [g["out"] for g in old["groups"]] == [7]


def test_split_by_metadata_uses_the_data_own_splits(trained):
    import dataclasses

    from causalcache_lab.selector.train import TrainConfig, train_selector
    from causalcache_memory.errors import ConfigError

    _, _, examples = trained
    ids = sorted({ex.trajectory_id for ex in examples})
    dev_ids = set(ids[:6])  # e.g. the world's dev templates
    tagged = [
        dataclasses.replace(ex, data_split="dev" if ex.trajectory_id in dev_ids else "train")
        for ex in examples
    ]
    result = train_selector(tagged, TrainConfig(epochs=1, split_by="metadata"), export_onnx=False)
    assert set(result.metadata["splits"]["dev"]) == dev_ids and result.metadata["states"]["test"] == 0
    assert result.metadata["calibration"]["split"] == "dev"
    with pytest.raises(ConfigError, match="data_split"):
        train_selector(examples, TrainConfig(epochs=1, split_by="metadata"), export_onnx=False)
    with pytest.raises(ConfigError, match="split_by"):
        TrainConfig(split_by="template")
