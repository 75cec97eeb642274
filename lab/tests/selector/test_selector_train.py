from __future__ import annotations

import json

import numpy as np
import pytest
from selector_synth import FakeThumbs, make_trajectories

from causalcache_memory.errors import ConfigError

torch = pytest.importorskip("torch")

from causalcache_lab.selector.train import TorchSetScorer, TrainConfig, load_model  # noqa: E402
from causalcache_memory.selector.beam import beam_search  # noqa: E402
from causalcache_memory.selector.features import FeatureExtractor, context_features, feature_index  # noqa: E402


def test_training_reduces_loss_and_is_selected_on_dev(trained):
    result, out, _ = trained
    meta = result.metadata
    hist = meta["history"]
    assert hist[-1]["train_loss"] < 0.5 * hist[0]["train_loss"]
    best = meta["best_epoch"]
    assert 1 <= best <= len(hist)
    assert meta["metrics"]["dev"]["loss"] == pytest.approx(hist[best - 1]["dev"]["loss"], rel=1e-5)
    splits = {k: set(v) for k, v in meta["splits"].items()}
    assert not (splits["train"] & splits["dev"]) and not (splits["train"] & splits["test"])
    assert not (splits["dev"] & splits["test"]) and all(splits.values())
    on_disk = json.loads((out / "metadata.json").read_text())
    assert on_disk["schema_hash"] == meta["schema_hash"] and (out / "selector.onnx").is_file()


def test_ranks_the_useful_event_first_on_held_out_states(trained):
    result, _, _ = trained
    trajs, useful = make_trajectories(10, length=14, seed=99)  # unseen trajectories
    ext = FeatureExtractor(FakeThumbs())
    hits = total = 0
    for traj in trajs:
        for t in range(9, 15):
            target = traj.steps[t - 1]
            good = {
                j for j in range(1, t - 2) if traj.steps[j - 1].screenshot_after in useful[target.response]
            }
            if not good:
                continue
            trace = traj.trace_at(t)
            scorer = TorchSetScorer(
                result.model, ext(trace, 2, target.action), context_features(t, 2, target.action)
            )
            res = beam_search(scorer, t=t, budget=2)
            distant = {j: s for j, s in res.scores.items() if j < t - 2}
            hits += max(distant, key=distant.get) in good
            total += 1
    assert total >= 10 and hits / total >= 0.8


#: small-data smoke runs: below the guard and calibration minimums on purpose
SMOKE = {"min_train_states": 2, "min_dev_states": 1}


def test_dropped_features_do_not_influence_scores(world, labelled, tmp_path):
    from causalcache_lab.selector.train import build_examples, train_selector

    trajs, _ = world
    _, _header, records = labelled
    examples = build_examples(
        records[::12], {t.trajectory_id: t for t in trajs}
    )  # 40 states, 24 trajectories
    drop = ("in_recent", "recent_rank", "is_oldest_recent")
    res = train_selector(examples, TrainConfig(epochs=2, drop_features=drop, **SMOKE), export_onnx=False)
    x = torch.from_numpy(examples[0].events.copy())
    sets, mask, ctx = torch.tensor([[0, 1]]), torch.ones(1, 2), torch.from_numpy(examples[0].context)
    before = res.model(x, sets, mask, ctx)
    x[:, [feature_index(n) for n in drop]] = 7.0
    torch.testing.assert_close(res.model(x, sets, mask, ctx), before)


def test_training_is_deterministic(world, labelled):
    from causalcache_lab.selector.train import build_examples, train_selector

    trajs, _ = world
    _, _, records = labelled
    ex = build_examples(records[::16], {t.trajectory_id: t for t in trajs})  # 30 states, 24 trajectories
    a = train_selector(ex, TrainConfig(epochs=2, seed=3, **SMOKE), export_onnx=False)
    b = train_selector(ex, TrainConfig(epochs=2, seed=3, **SMOKE), export_onnx=False)
    for (k, va), vb in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
        assert torch.equal(va, vb), k


def test_load_model_roundtrip(trained):
    result, out, examples = trained
    model, _meta = load_model(out)
    ex = examples[0]
    s1 = TorchSetScorer(model, ex.events, ex.context)([(1, 2)])
    s2 = TorchSetScorer(result.model, ex.events, ex.context)([(1, 2)])
    np.testing.assert_array_equal(s1, s2)


def test_bad_train_config_lists_every_problem():
    with pytest.raises(ConfigError) as info:
        TrainConfig(splits=(0.5, 0.1, 0.1), witness="maybe", drop_features=("nope",))
    assert len(info.value.errors) == 3


def test_mask_summary_masks_event_rows_as_it_masks_their_mean():
    from causalcache_memory.selector.features import FEATURE_SCHEMA
    from causalcache_memory.selector.ood_masks import group_columns, mask_summary

    groups = group_columns([n for n, _ in FEATURE_SCHEMA])
    events = np.random.default_rng(0).uniform(0.1, 1.0, size=(5, len(FEATURE_SCHEMA)))
    masked = mask_summary(events, groups, "app+text")
    cols = [*groups["app"], *groups["text"]]
    assert masked.shape == events.shape and np.all(masked[:, cols] == 0.0)
    keep = [i for i in range(events.shape[1]) if i not in set(cols)]
    np.testing.assert_array_equal(masked[:, keep], events[:, keep])
    np.testing.assert_array_equal(masked.mean(axis=0), mask_summary(events.mean(axis=0), groups, "app+text"))


def test_mask_dropout_masks_whole_groups_reproducibly():
    from causalcache_lab.selector.examples import StateExample
    from causalcache_lab.selector.mask_dropout import MaskDropout
    from causalcache_memory.selector.features import FEATURE_SCHEMA

    width = len(FEATURE_SCHEMA)
    ex = StateExample(
        "t", 5, 2, np.ones((4, width), np.float32), np.zeros((1, 1)), [(1,)], *[np.zeros(1)] * 4
    )
    text, app = feature_index("text_available"), feature_index("app_available")
    first, second = MaskDropout({"text": 0.5}, seed=7), MaskDropout({"text": 0.5}, seed=7)
    outs = [first(ex).events for _ in range(40)]
    seen = [e[0, text] for e in outs]
    assert seen == [second(ex).events[0, text] for _ in range(40)]  # same seed: the same states masked
    assert 0 < seen.count(0.0) < 40  # some states, not all
    masked = next(e for e in outs if e[0, text] == 0.0)
    text_cols = [i for i, (n, _) in enumerate(FEATURE_SCHEMA) if n.startswith("text_")]
    assert np.all(masked[:, text_cols] == 0.0) and np.all(masked[:, app] == 1.0)  # the whole group, only it
    assert np.all(ex.events == 1.0)  # the example itself is not modified
    assert MaskDropout({}, seed=7)(ex) is ex


def test_training_with_mask_dropout_is_deterministic_and_differs_from_without(world, labelled):
    from causalcache_lab.selector.train import build_examples, train_selector

    trajs, _ = world
    _, _, records = labelled
    ex = build_examples(records[::16], {t.trajectory_id: t for t in trajs})  # 30 states, 24 trajectories
    assert any(e.events[:, feature_index("app_available")].any() for e in ex)  # the stand-in has app labels
    cfg = {"epochs": 2, "seed": 3, "mask_dropout": {"app": 0.5}, **SMOKE}
    a = train_selector(ex, TrainConfig(**cfg), export_onnx=False)
    b = train_selector(ex, TrainConfig(**cfg), export_onnx=False)
    plain = train_selector(ex, TrainConfig(epochs=2, seed=3, **SMOKE), export_onnx=False)
    for (k, va), vb in zip(a.model.state_dict().items(), b.model.state_dict().values(), strict=True):
        assert torch.equal(va, vb), k
    assert any(
        not torch.equal(va, vp)
        for va, vp in zip(a.model.state_dict().values(), plain.model.state_dict().values(), strict=True)
    )
    assert a.metadata["train"]["mask_dropout"] == {"app": 0.5}


def test_mask_dropout_names_the_group_and_the_fix():
    with pytest.raises(
        ConfigError, match=r"mask_dropout: unknown group 'pixels'; choose from app, text, image"
    ):
        TrainConfig(mask_dropout={"pixels": 0.3})
    with pytest.raises(ConfigError, match=r"mask_dropout.text=1.0 must be a probability in \[0, 1\)"):
        TrainConfig(mask_dropout={"text": 1.0})
    assert TrainConfig().mask_dropout == {}
