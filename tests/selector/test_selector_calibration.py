"""Calibrated swap threshold (``min_gain: auto``), the OOD guard, all-slot labels (issue 14)."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_memory.allocation import AllocationContext, recent_b
from causalcache_memory.lab.selector.examples import StateExample
from causalcache_memory.selector.features import NUM_FEATURES
from causalcache_memory.selector.ood import OodGuard, state_summary

onnx_mod = pytest.importorskip("onnxruntime")


def _example(gains_y: list[tuple[float, float]], split: str = "") -> tuple[np.ndarray, StateExample]:
    """A state with one Recent-B group whose candidates have predicted gains and true utilities."""
    n = len(gains_y) + 1
    d = np.array([g for g, _ in gains_y] + [0.0])
    ex = StateExample(
        "tr",
        n + 1,
        1,
        np.zeros((n, NUM_FEATURES), np.float32),
        np.zeros((1, 12), np.float32),
        [()],
        np.zeros(n, int),
        np.array([*range(len(gains_y)), n - 1]),
        np.full(n, n - 1),
        np.array([y for _, y in gains_y] + [0.0], np.float32),
        from_recent=np.array([True]),
        task_split=split,
    )
    return d, ex


def test_threshold_rule_admits_at_most_one_percent_of_non_improving_top_swaps():
    from causalcache_memory.lab.selector.calibrate import ALPHA, calibrate_threshold, top_swaps

    rng = np.random.default_rng(0)
    states = []
    for i in range(400):  # 300 states whose best swap is useless, 100 whose best swap helps
        good = i % 4 == 0
        g = float(rng.normal(0.8 if good else 0.1, 0.3))
        states.append(
            _example([(g, 0.5 if good else -0.01), (g - 1.0, -0.2)], "memory_critical" if good else "control")
        )
    diffs, examples = [d for d, _ in states], [e for _, e in states]
    report = calibrate_threshold(diffs, examples)
    gains, utils, _ = top_swaps(diffs, examples)
    tau = report["min_gain"]
    bad = gains[utils <= 0]
    assert (bad > tau).sum() <= ALPHA * len(bad)
    # smallest such threshold: the next lower candidate value admits too many
    lower = np.sort(bad[bad <= tau])[-1] - 1e-9
    assert (bad > lower).sum() > ALPHA * len(bad)
    assert report["dev_fire_rate_control"] <= 0.02 < report["dev_fire_rate_memory_critical"]
    assert report["dev_fire_rate"] < report["dev_fire_rate_at_0"]
    assert "1%" in report["rule"]


def test_calibration_and_ood_metadata_round_trip(trained):
    from causalcache_memory.lab.selector.calibrate import THRESHOLD_RULE
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    result, out, _ = trained
    meta = result.metadata
    on_disk = json.loads((out / "metadata.json").read_text())
    model = OnnxScorer(out)
    assert (
        model.calibration["min_gain"] == meta["calibration"]["min_gain"] == on_disk["calibration"]["min_gain"]
    )
    assert model.calibration["rule"] == THRESHOLD_RULE and model.calibrated_min_gain >= 0.0
    assert model.ood is not None and model.ood.threshold == pytest.approx(meta["ood"]["threshold"])
    np.testing.assert_allclose(model.ood.mean, json.loads(meta["ood"]["guard"])["mean"])
    assert 0.0 <= meta["ood"]["dev_flagged"] <= 0.05  # in-distribution states are rarely flagged
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


def test_ood_guard_rule():
    rng = np.random.default_rng(1)
    from causalcache_memory.lab.selector.calibrate import fit_ood

    def ex(z):
        return StateExample(
            "t", 3, 1, np.tile(z, (2, 1)).astype(np.float32), np.zeros((1, 12)), [], *[np.zeros(0)] * 4
        )

    base = rng.random(NUM_FEATURES)
    train = [ex(base + 0.01 * rng.normal(size=NUM_FEATURES)) for _ in range(300)]
    dev = [ex(base + 0.01 * rng.normal(size=NUM_FEATURES)) for _ in range(50)]
    guard, report = fit_ood(train, dev)
    assert report["dev_flagged"] <= 0.05
    assert not guard.is_ood(state_summary(train[0].events))[0]
    shifted = base.copy()
    shifted[5] += 0.5  # one feature far outside its training range
    assert guard.is_ood(shifted)[0]
    assert guard.is_ood(np.full(NUM_FEATURES, np.nan))[0]  # a non-finite state is never in distribution
    again = OodGuard.from_json(guard.to_json(), guard.features)
    assert again.threshold == guard.threshold and again.distance(shifted) == pytest.approx(
        guard.distance(shifted)
    )


def test_ood_fallback_has_reason_ood_in_the_decision_log(trained):
    from causalcache_memory import Action
    from causalcache_memory.controller import MemoryController
    from causalcache_memory.policy import Generation
    from causalcache_memory.selector.allocator import SelectorAllocator

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
        sel = SelectorAllocator(out, ood_scale=scale, min_gain=0)
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
    from causalcache_memory.lab.selector.labels import LabelConfig, label_state

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

    from causalcache_memory.errors import ConfigError
    from causalcache_memory.lab.selector.train import TrainConfig, train_selector

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
