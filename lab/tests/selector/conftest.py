"""Fixtures of the selector tests: a stand-in world, its labels and one small trained scorer."""

from __future__ import annotations

import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

RECENCY = ("in_recent", "recent_rank", "is_oldest_recent")


@pytest.fixture(scope="session")
def world():
    trajs, useful = make_trajectories(24, length=14, seed=0)
    return trajs, useful


@pytest.fixture(scope="session")
def labelled(world, tmp_path_factory):
    from causalcache_lab.selector.labels import LabelConfig, read_labels, run_labelling

    trajs, useful = world
    path = tmp_path_factory.mktemp("labels") / "labels.jsonl"
    run_labelling(
        MarkerPolicy(useful), DictArchive(), trajs, path, LabelConfig(budgets=(2, 4)), progress=False
    )
    return path, *read_labels(path)


@pytest.fixture(scope="session")
def trained(world, labelled, tmp_path_factory):
    """A scorer trained on the stand-in labels, exported to ONNX: ``(TrainResult, model_dir, examples)``."""
    pytest.importorskip("torch")
    from causalcache_lab.selector.train import TrainConfig, build_examples, train_selector
    from causalcache_memory.selector.features import FeatureExtractor

    trajs, _ = world
    _, header, records = labelled
    # no thumbnails: the policy under test runs without an archive, so its image features are 0 too
    examples = build_examples(records, {t.trajectory_id: t for t in trajs}, extractor=FeatureExtractor())
    out = tmp_path_factory.mktemp("model") / "selector"
    result = train_selector(
        examples,
        TrainConfig(epochs=15, seed=0),
        output_dir=out,
        data_description="stand-in marker world",
        label_header=header,
    )
    return result, out, examples


@pytest.fixture
def bad_base(trained, tmp_path):  # type: ignore[no-untyped-def]
    """``(dev-split examples, a base trained on negated targets, its directory)``: fine-tuning beats it."""
    from example_splits import SMOKE, by_trajectory, negated

    from causalcache_lab.selector.train import TrainConfig, train_selector

    _, _, examples = trained
    data = by_trajectory(examples)
    cfg = TrainConfig(epochs=6, split_by="metadata", **SMOKE)
    bad = train_selector(negated(data), cfg, output_dir=tmp_path / "bad")
    return data, bad, tmp_path / "bad"
