"""Fine-tuning from a base selector (``train.init_from``): ONNX -> torch parity, refusals, epoch 0, provenance."""

from __future__ import annotations

import hashlib
import shutil

import numpy as np
import pytest

from causalcache_memory.errors import ConfigError, SchemaMismatchError

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from example_splits import flipped_on_train  # noqa: E402

from causalcache_lab.selector.base_model import load_base, resolve_base  # noqa: E402
from causalcache_lab.selector.model import ScorerConfig, SetScorerModel, pack_sets  # noqa: E402
from causalcache_lab.selector.train import TrainConfig, train_selector  # noqa: E402
from causalcache_memory.selector.onnx_scorer import OnnxScorer  # noqa: E402

SMOKE = {"min_train_states": 2, "min_dev_states": 1}


def _torch_scores(state: dict, cfg: ScorerConfig, events, sets, context) -> np.ndarray:
    model = SetScorerModel(cfg)
    model.load_state_dict(state)
    model.eval()
    rows, mask = pack_sets(sets)
    with torch.no_grad():
        return model(
            torch.from_numpy(events), torch.tensor(rows), torch.tensor(mask), torch.from_numpy(context)
        ).numpy()


@pytest.mark.parametrize("seed", [1, 2])
def test_bundled_base_scores_as_its_onnx_graph(seed) -> None:
    base = load_base("bundled", ScorerConfig())
    rng = np.random.default_rng(seed)
    events = rng.normal(scale=2.0, size=(23, base.scorer.num_features)).astype(np.float32)
    context = rng.normal(size=(1, base.scorer.num_context)).astype(np.float32)
    sets = [tuple(sorted(rng.choice(np.arange(1, 24), size=k, replace=False).tolist())) for k in (1, 4, 5, 3)]
    expected = OnnxScorer(resolve_base("bundled")).score_sets(events, sets, context)
    got = _torch_scores(base.state_dict, base.scorer, events, sets, context)
    assert np.abs(expected).max() > 0.1  # a real comparison, not of zeros
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=1e-5)


def test_a_trained_model_directory_loads_back_to_its_own_weights(trained) -> None:
    result, out, _ = trained
    base = load_base(str(out), result.model.config)
    for name, value in result.model.state_dict().items():
        torch.testing.assert_close(base.state_dict[name], value, rtol=0, atol=0)
    assert base.target_scale == pytest.approx(result.metadata["target_scale"])
    assert base.sha256 == hashlib.sha256((out / "selector.onnx").read_bytes()).hexdigest()


def test_other_architecture_is_refused_naming_both() -> None:
    with pytest.raises(SchemaMismatchError, match=r"hidden=64.*asks for hidden=32"):
        load_base("bundled", ScorerConfig(hidden=32))
    with pytest.raises(SchemaMismatchError, match=r"drop_features=\[\].*drop_features=\['in_recent'\]"):
        load_base("bundled", ScorerConfig(drop_features=("in_recent",)))


def _edited_copy(tmp_path, edit):  # type: ignore[no-untyped-def]
    path = tmp_path / "base.onnx"
    proto = onnx.load(str(resolve_base("bundled")))
    edit(proto)
    onnx.save(proto, str(path))
    return path


def test_other_feature_schema_is_refused_naming_both(tmp_path) -> None:
    def stale_schema(proto) -> None:  # type: ignore[no-untyped-def]
        for p in proto.metadata_props:
            if p.key == "causalcache.schema_hash":
                p.value = "0123456789abcdef"

    path = _edited_copy(tmp_path, stale_schema)
    with pytest.raises(SchemaMismatchError, match=r"'0123456789abcdef'.*extracts schema '[0-9a-f]{16}'"):
        load_base(str(path), ScorerConfig())


def test_a_graph_that_is_not_the_scorer_is_refused(tmp_path) -> None:
    def rename(proto) -> None:  # type: ignore[no-untyped-def]
        for init in proto.graph.initializer:
            if init.name == "ctx_out.bias":
                init.name = "ctx_out.offset"
        for node in proto.graph.node:
            node.input[:] = ["ctx_out.offset" if i == "ctx_out.bias" else i for i in node.input]

    with pytest.raises(SchemaMismatchError, match=r"lacks the scorer's parameters \['ctx_out.bias'\]"):
        load_base(str(_edited_copy(tmp_path, rename)), ScorerConfig())
    with pytest.raises(ConfigError, match=r"train\.init_from='nowhere'"):
        load_base("nowhere", ScorerConfig())


def test_epoch_0_keeps_the_base_when_fine_tuning_hurts_dev(trained, tmp_path) -> None:
    result, base_dir, examples = trained
    data = flipped_on_train(examples)
    cfg = TrainConfig(init_from=str(base_dir), epochs=4, lr=0.03, patience=4, split_by="metadata", **SMOKE)
    tuned = train_selector(data, cfg, output_dir=tmp_path / "tuned")
    meta = tuned.metadata
    assert [h["epoch"] for h in meta["history"]][:2] == [0, 1]
    assert meta["history"][1]["dev"]["value"] < meta["history"][0]["dev"]["value"]  # fine-tuning hurt
    assert meta["best_epoch"] == 0 and meta["init_from"]["epochs_fine_tuned"] == 0
    for name, value in result.model.state_dict().items():
        torch.testing.assert_close(tuned.model.state_dict()[name], value, rtol=0, atol=0)
    # the base shipped unchanged, and its own guard accepts these states: its calibration ships too
    assert meta["init_from"]["base_calibration"]["kept"] is True
    assert meta["calibration"] == result.metadata["calibration"] and meta["ood"] == result.metadata["ood"]


def test_fine_tuning_records_its_base_and_keeps_its_target_scale(trained, tmp_path) -> None:
    result, base_dir, examples = trained
    copy = tmp_path / "base"
    shutil.copytree(base_dir, copy)
    cfg = TrainConfig(init_from=str(copy), epochs=3, seed=1, **SMOKE)
    tuned = train_selector(examples, cfg, output_dir=tmp_path / "tuned")
    init = tuned.metadata["init_from"]
    assert init["sha256"] == hashlib.sha256((copy / "selector.onnx").read_bytes()).hexdigest()
    assert init["spec"] == str(copy) and init["epochs_fine_tuned"] == tuned.metadata["best_epoch"]
    assert tuned.metadata["target_scale"] == pytest.approx(result.metadata["target_scale"])
    assert tuned.metadata["train"]["init_from"] == str(copy)
    scratch = train_selector(examples, TrainConfig(epochs=3, seed=1, **SMOKE), export_onnx=False)
    assert "init_from" not in scratch.metadata and scratch.metadata["history"][0]["epoch"] == 1
