"""``train.ensemble``: E scorers trained with seeds seed..seed+E-1, exported as one graph of their mean."""

from __future__ import annotations

import numpy as np
import pytest

from causalcache_memory.errors import ConfigError

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

from example_splits import flipped_on_train  # noqa: E402

from causalcache_lab.selector.base_model import load_base  # noqa: E402
from causalcache_lab.selector.ensemble import EnsembleScorer  # noqa: E402
from causalcache_lab.selector.export import export_onnx  # noqa: E402
from causalcache_lab.selector.model import SetScorerModel, pack_sets  # noqa: E402
from causalcache_lab.selector.train import TrainConfig, build_examples, load_model, train_selector  # noqa: E402
from causalcache_memory.selector.features import NUM_CONTEXT, NUM_FEATURES  # noqa: E402
from causalcache_memory.selector.onnx_scorer import OnnxScorer  # noqa: E402

#: small-data runs: below the guard and calibration minimums on purpose
SMOKE = {"min_train_states": 2, "min_dev_states": 1, "epochs": 3}


@pytest.fixture(scope="module")
def examples(world, labelled):
    from causalcache_memory.selector.features import FeatureExtractor

    trajs, _ = world
    _, _, records = labelled
    return build_examples(records[::6], {t.trajectory_id: t for t in trajs}, extractor=FeatureExtractor())


@pytest.fixture(scope="module")
def ensemble(examples, tmp_path_factory):
    """An ensemble of 3 (seeds 5, 6, 7) exported to ONNX: ``(TrainResult, model_dir)``."""
    out = tmp_path_factory.mktemp("ensemble") / "selector"
    return train_selector(examples, TrainConfig(seed=5, ensemble=3, **SMOKE), output_dir=out), out


def _inputs(seed: int, n_events: int = 19):  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(seed)
    events = rng.normal(scale=2.0, size=(n_events, NUM_FEATURES)).astype(np.float32)
    context = rng.normal(size=(1, NUM_CONTEXT)).astype(np.float32)
    sets = [
        tuple(sorted(rng.choice(np.arange(1, n_events + 1), size=k, replace=False).tolist()))
        for k in (0, 1, 4, 3)
    ]
    return events, sets, context


def _torch(model, events, sets, context) -> np.ndarray:  # type: ignore[no-untyped-def]
    rows, mask = pack_sets(sets)
    with torch.no_grad():
        return model(
            torch.from_numpy(events), torch.tensor(rows), torch.tensor(mask), torch.from_numpy(context)
        ).numpy()


def _same_weights(a, b) -> bool:  # type: ignore[no-untyped-def]
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("seed", [0, 1])
def test_exported_graph_scores_the_mean_of_the_members(ensemble, seed) -> None:
    result, out = ensemble
    model = result.model
    assert isinstance(model, EnsembleScorer) and len(model.members) == 3
    events, sets, context = _inputs(seed)
    each = [_torch(m, events, sets, context) for m in model.members]
    assert min(np.abs(each[0] - each[e]).max() for e in (1, 2)) > 1e-3  # the members differ
    onnx_scores = OnnxScorer(out).score_sets(events, sets, context)
    assert onnx_scores.shape == (len(sets), len(events))
    np.testing.assert_allclose(onnx_scores, np.mean(each, axis=0), atol=1e-5, rtol=1e-5)
    # the run-time scorer reads the graph as a single scorer's: same inputs, output, metadata keys
    graph = onnx.load(str(out / "selector.onnx")).graph
    assert [i.name for i in graph.input] == ["events", "sets", "set_mask", "context"]
    assert [o.name for o in graph.output] == ["scores"]


def test_member_e_is_the_single_scorer_of_seed_plus_e(examples, ensemble) -> None:
    result, _ = ensemble
    for e, seed in enumerate((5, 6, 7)):
        single = train_selector(examples, TrainConfig(seed=seed, **SMOKE), export_onnx=False)
        assert isinstance(single.model, SetScorerModel)
        assert _same_weights(single.model, result.model.members[e]), seed
        assert single.metadata["best_epoch"] == result.metadata["ensemble"]["epochs"][e]
        assert single.metadata["ensemble"] == {
            "members": 1,
            "seeds": [seed],
            "epochs": [single.metadata["best_epoch"]],
        }


def test_metadata_records_the_members_and_loads_back(ensemble) -> None:
    result, out = ensemble
    meta = result.metadata
    epochs = meta["ensemble"]["epochs"]
    assert meta["ensemble"] == {"members": 3, "seeds": [5, 6, 7], "epochs": epochs}
    assert len(epochs) == 3 and all(1 <= e <= 3 for e in epochs)
    assert meta["best_epoch"] == epochs and [len(h) for h in meta["history"]] == [3, 3, 3]
    assert meta["train"]["ensemble"] == 3
    model, on_disk = load_model(out)
    assert on_disk["ensemble"] == meta["ensemble"] and isinstance(model, EnsembleScorer)
    assert _same_weights(model, result.model)


def test_ensemble_training_is_reproducible(examples, ensemble, tmp_path) -> None:
    result, out = ensemble
    again = train_selector(examples, TrainConfig(seed=5, ensemble=3, **SMOKE), output_dir=tmp_path / "again")
    assert _same_weights(again.model, result.model)
    first, second = (
        onnx.load(str(out / "selector.onnx")),
        onnx.load(str(tmp_path / "again" / "selector.onnx")),
    )
    assert [(i.name, i.raw_data) for i in first.graph.initializer] == [
        (i.name, i.raw_data) for i in second.graph.initializer
    ]
    other = train_selector(examples, TrainConfig(seed=6, ensemble=3, **SMOKE), export_onnx=False)
    assert not _same_weights(other.model, result.model)


def test_one_member_exports_the_single_scorer_graph(examples, tmp_path) -> None:
    single = train_selector(examples, TrainConfig(seed=5, **SMOKE), output_dir=tmp_path / "one")
    assert isinstance(single.model, SetScorerModel)  # not wrapped: the same module, graph and names
    proto = onnx.load(str(tmp_path / "one" / "selector.onnx"))
    names = {i.name for i in proto.graph.initializer}
    assert set(single.model.state_dict()) <= names and not any(n.startswith("members.") for n in names)
    export_onnx(single.model, tmp_path / "again.onnx", metadata=single.metadata)
    assert (tmp_path / "again.onnx").read_bytes() == (tmp_path / "one" / "selector.onnx").read_bytes()


@pytest.mark.parametrize("bad", [0, -2])
def test_ensemble_below_one_is_refused_naming_value_and_fix(bad) -> None:
    with pytest.raises(
        ConfigError, match=rf"train.ensemble={bad} must be at least 1 .*set train.ensemble: 1"
    ):
        TrainConfig(ensemble=bad)
    assert TrainConfig().ensemble == 1


def test_an_ensemble_base_loads_member_by_member(ensemble) -> None:
    result, out = ensemble
    base = load_base(str(out), result.model.config)  # parity of the torch mean with the graph checked inside
    assert base.members == 3 and base.provenance("x")["members"] == 3
    for e, member in enumerate(result.model.members):
        state = base.member_state(e)
        assert state.keys() == member.state_dict().keys()
        assert all(torch.equal(state[k], v) for k, v in member.state_dict().items())


def test_fine_tuning_an_ensemble_base_needs_its_member_count(examples, ensemble, tmp_path) -> None:
    result, out = ensemble
    with pytest.raises(
        ConfigError, match=r"ensemble of 3 scorers but train.ensemble=1; set train.ensemble: 3"
    ):
        train_selector(examples, TrainConfig(init_from=str(out), **SMOKE), export_onnx=False)
    # train states' targets flipped: fine-tuning hurts dev, so every member keeps its own base member (epoch 0)
    data = flipped_on_train(examples)
    cfg = TrainConfig(init_from=str(out), ensemble=3, lr=0.03, split_by="metadata", **SMOKE)
    tuned = train_selector(data, cfg, export_onnx=False)
    assert tuned.metadata["ensemble"]["epochs"] == [0, 0, 0]
    assert tuned.metadata["init_from"]["members"] == 3
    assert all(_same_weights(a, b) for a, b in zip(tuned.model.members, result.model.members, strict=True))


def test_a_single_base_starts_every_member(trained, examples, tmp_path) -> None:
    _, base_dir, _ = trained
    cfg = TrainConfig(init_from=str(base_dir), ensemble=2, **{**SMOKE, "epochs": 1})
    tuned = train_selector(examples, cfg, export_onnx=False)
    assert tuned.metadata["init_from"]["members"] == 1 and tuned.metadata["ensemble"]["members"] == 2
    assert [h[0]["epoch"] for h in tuned.metadata["history"]] == [0, 0]  # each member's epoch 0 is the base
    assert tuned.metadata["history"][0][0]["dev"] == tuned.metadata["history"][1][0]["dev"]
