"""The fine-tune gate (``train.fine_tune_gate``): a fine-tuned selector ships only when dev shows its gain."""

from __future__ import annotations

import numpy as np
import pytest
from example_splits import SMOKE

from causalcache_lab.selector.fine_tune_gate import fine_tune_evidence


def test_a_clear_gain_is_kept_and_noise_is_not() -> None:
    rng = np.random.default_rng(0)
    base = rng.normal(0.0, 0.1, 200)
    clear = fine_tune_evidence(base + 0.05, base, confidence=0.95, seed=0)
    assert clear["keep"] and clear["delta"] == pytest.approx(0.05) and clear["ci"][0] > 0
    noise = fine_tune_evidence(base + rng.normal(0.0, 0.1, 200), base, confidence=0.95, seed=0)
    assert not noise["keep"] and noise["ci"][0] <= 0 <= noise["ci"][1]
    # a gain on a handful of groups out of many is not shown
    few = base.copy()
    few[:2] += 0.3
    assert not fine_tune_evidence(few, base, confidence=0.95, seed=0)["keep"]


def test_a_negligible_gain_is_not_kept_even_when_it_is_consistent() -> None:
    """devage-02 (RESULTS.md 9f): per-group gains of ~1e-4, all positive, showed a 'gain' above 0."""
    rng = np.random.default_rng(2)
    base = rng.normal(0.0, 0.1, 200)
    tiny = base + 1e-4
    shown = fine_tune_evidence(tiny, base, confidence=0.95, seed=0)
    assert shown["keep"] and shown["ci"][0] > 0  # without a margin it ships
    margin = fine_tune_evidence(tiny, base, confidence=0.95, seed=0, min_gain=0.05 * 0.0756)
    assert not margin["keep"] and margin["min_gain"] == pytest.approx(0.00378)
    assert fine_tune_evidence(base + 0.05, base, confidence=0.95, seed=0, min_gain=0.00378)["keep"]


def test_the_gate_margin_is_a_share_of_the_bases_target_scale(caplog) -> None:
    from types import SimpleNamespace

    from causalcache_lab.selector.fine_tune_gate import MIN_SHOWN_GAIN, gate_fine_tune

    tuned_values, base_values = np.full(50, 0.0102), np.full(50, 0.01)  # +0.0002 on every group
    base = SimpleNamespace(
        target_scale=0.08, scorer=None, member_module=lambda scorer: "base-module"
    )  # fmt: skip
    values = lambda m: base_values if m == "base-module" else tuned_values  # noqa: E731
    cfg = SimpleNamespace(fine_tune_gate=0.95, ensemble=1, seed=0)
    with caplog.at_level("INFO", logger="causalcache_lab.selector.fine_tune_gate"):
        model, epoch, evidence = gate_fine_tune("tuned", 7, base, values, cfg)
    assert (model, epoch) == ("base-module", 0) and evidence["min_gain"] == pytest.approx(
        MIN_SHOWN_GAIN * 0.08
    )
    assert "needs the lower end above 0.0040" in caplog.text
    tuned_values = np.full(50, 0.02)  # +0.01 per group: above the margin
    assert gate_fine_tune("tuned", 7, base, values, cfg)[:2] == ("tuned", 7)


def test_evidence_is_reproducible_and_refuses_mismatched_groups() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=50), rng.normal(size=50)
    assert fine_tune_evidence(a, b, confidence=0.9, seed=3) == fine_tune_evidence(
        a, b, confidence=0.9, seed=3
    )
    with pytest.raises(ValueError, match="same dev groups"):
        fine_tune_evidence(a, b[:-1], confidence=0.9, seed=0)
    assert fine_tune_evidence(np.zeros(0), np.zeros(0), confidence=0.9, seed=0)["keep"] is False


torch = pytest.importorskip("torch")

from causalcache_lab.selector.train import TrainConfig, train_selector  # noqa: E402


def test_a_fine_tune_that_beats_a_bad_base_is_kept(bad_base, tmp_path, caplog) -> None:
    data, bad, bad_dir = bad_base
    cfg = TrainConfig(init_from=str(bad_dir), epochs=8, lr=0.01, split_by="metadata", **SMOKE)
    with caplog.at_level("INFO", logger="causalcache_lab.selector.fine_tune_gate"):
        tuned = train_selector(data, cfg, output_dir=tmp_path / "tuned")
    assert "fine-tune gate: dev gain over the base" in caplog.text and "fine-tuning kept" in caplog.text
    gate = tuned.metadata["init_from"]["gate"]
    assert bad.metadata["metrics"]["dev"]["value"] < tuned.metadata["metrics"]["dev"]["value"]
    assert gate["keep"] and gate["delta"] > 0 and gate["ci"][0] > 0 and gate["confidence"] == 0.95
    assert tuned.metadata["init_from"]["epochs_fine_tuned"] == tuned.metadata["best_epoch"] > 0


def test_without_evidence_the_base_ships_unchanged(bad_base, tmp_path, monkeypatch) -> None:
    import causalcache_lab.selector.fine_tune_gate as gate_module

    data, bad, bad_dir = bad_base
    cfg = TrainConfig(init_from=str(bad_dir), epochs=8, lr=0.01, split_by="metadata", **SMOKE)
    ungated = train_selector(data, cfg.model_copy(update={"fine_tune_gate": None}), export_onnx=False)
    assert ungated.metadata["best_epoch"] > 0 and ungated.metadata["init_from"]["gate"] is None
    seen = []

    def no_evidence(tuned, base, **kw):  # type: ignore[no-untyped-def]
        seen.append(len(tuned))
        return {
            "groups": len(tuned),
            "delta": 0.0,
            "ci": [-1.0, 1.0],
            "confidence": kw["confidence"],
            "keep": False,
        }

    monkeypatch.setattr(gate_module, "fine_tune_evidence", no_evidence)
    gated = train_selector(data, cfg, output_dir=tmp_path / "gated")
    meta = gated.metadata
    assert seen and meta["best_epoch"] == 0 and meta["init_from"]["epochs_fine_tuned"] == 0
    assert meta["init_from"]["gate"]["keep"] is False
    for name, value in bad.model.state_dict().items():
        torch.testing.assert_close(gated.model.state_dict()[name], value, rtol=0, atol=0)


def test_a_base_kept_on_screens_its_guard_rejects_is_recalibrated_on_the_data(
    bad_base, tmp_path, monkeypatch, caplog
) -> None:
    import causalcache_lab.selector.fine_tune_gate as gate_module
    import causalcache_lab.selector.keep_base as keep_base

    data, bad, bad_dir = bad_base
    monkeypatch.setattr(
        gate_module,
        "fine_tune_evidence",
        lambda t, b, **kw: {"keep": False, "ci": [0, 0], "delta": 0, "groups": len(t)},
    )
    cfg = TrainConfig(init_from=str(bad_dir), epochs=8, lr=0.01, split_by="metadata", **SMOKE)
    fits = train_selector(data, cfg, export_onnx=False).metadata
    assert (
        fits["init_from"]["base_calibration"]["kept"] and fits["calibration"] == bad.metadata["calibration"]
    )
    monkeypatch.setattr(
        keep_base, "BASE_GUARD_MAX_FLAGGED", -1.0
    )  # no share of flagged states is small enough
    meta = train_selector(data, cfg, export_onnx=False).metadata
    report = meta["init_from"]["base_calibration"]
    assert report["kept"] is False and "refitted" in report["reason"]
    dev_states = len([e for e in data if e.data_split == "dev"])
    assert meta["calibration"]["split"] == "dev" and meta["calibration"]["dev_states"] == dev_states
    assert meta["ood"]["train_states"] == len(data) - dev_states


@pytest.mark.parametrize("value", [0.0, 1.0, 1.5])
def test_a_confidence_outside_0_1_is_refused(value) -> None:
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.fine_tune_gate"):
        TrainConfig(fine_tune_gate=value)
