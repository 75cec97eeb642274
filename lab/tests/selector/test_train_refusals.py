"""``train selector`` refuses data it cannot train, calibrate or guard on, never loads the labeller, and
the simulated policy is refused as the labeller of real data (issue 25 silent failures)."""

from __future__ import annotations

import dataclasses
import json

import pytest
from selector_synth import MarkerPolicy, make_trajectories

from causalcache_memory.errors import ConfigError

pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _trust_test_factories(monkeypatch):
    """The configs here name factories of test modules: trusted as the user would (the environment)."""
    monkeypatch.setenv("CAUSALCACHE_TRUSTED_MODULES", "selector_synth,test_train_refusals")


def exploding_policy(**_: object) -> None:
    """A recipe ``policy.factory`` standing for an 8B VLM on CUDA: training must never call it."""
    raise RuntimeError("train selector loaded the labelling policy")


def _recipe(tmp_path, name: str, *, train: dict, policy: bool = False) -> str:
    recipe = {
        "setup": {
            "factory": "selector_synth:selector_setup",
            "kwargs": {"n": 8, "length": 12, "archive": str(tmp_path / "archive")},
        },
        "labels": {"output": str(tmp_path / "labels.jsonl"), "budgets": [2]},
        "train": {"output_dir": str(tmp_path / name), "epochs": 1, **train},
    }
    if policy:
        recipe["policy"] = {"factory": "test_train_refusals:exploding_policy"}
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(recipe))
    return str(path)


def test_no_dev_states_is_refused_and_nothing_is_written(tmp_path, capsys) -> None:
    """Used to calibrate the swap threshold on the training split with exit status 0."""
    from causalcache_memory.cli.main import main

    recipe = _recipe(tmp_path, "model", train={"splits": [1.0, 0.0, 0.0]})
    assert main(["label", "selector", "--recipe", recipe, "--no-progress"]) == 0
    capsys.readouterr()
    assert main(["train", "selector", "--recipe", recipe]) == 1
    err = capsys.readouterr().err
    assert "0 dev states (calibration needs >= 20)" in err and "8 trajectories (72 states)" in err
    assert not (tmp_path / "model").exists()


def test_training_never_builds_the_labelling_policy(tmp_path, capsys) -> None:
    from causalcache_memory.cli.main import main

    label = _recipe(tmp_path, "model", train={})
    assert main(["label", "selector", "--recipe", label, "--no-progress"]) == 0
    smoke = {"min_train_states": 10, "min_dev_states": 2, "splits": [0.6, 0.4, 0.0]}
    train = _recipe(tmp_path, "model", train=smoke, policy=True)
    assert main(["train", "selector", "--recipe", train, "--skip-ablation"]) == 0
    assert (tmp_path / "model" / "selector.onnx").is_file()


@pytest.fixture(scope="module")
def examples():
    """20 labelled states per trajectory (B = 2 and 4 over 14 steps), 12 trajectories."""
    from selector_synth import DictArchive

    from causalcache_lab.selector.labels import LabelConfig, label_state
    from causalcache_lab.selector.train import build_examples

    trajs, useful = make_trajectories(12, length=14, seed=5)
    cfg = LabelConfig(budgets=(2, 4), path_length=0)
    records = [
        label_state(MarkerPolicy(useful), DictArchive(), traj, t, b, cfg)
        for traj in trajs
        for b in (2, 4)
        for t in range(b + 2, 15)
    ]
    return build_examples(records, {t.trajectory_id: t for t in trajs})


def test_too_few_training_states_for_the_guard_is_refused(examples) -> None:
    """43 training states: the OOD guard fitted on them declined every deployed decision."""
    from causalcache_lab.selector.train import TrainConfig, train_selector

    ids = sorted({ex.trajectory_id for ex in examples})
    train = [dataclasses.replace(ex, data_split="train") for ex in examples if ex.trajectory_id in ids[:3]]
    dev = [dataclasses.replace(ex, data_split="dev") for ex in examples if ex.trajectory_id in ids[6:]]
    tagged = train[:43] + dev
    assert sum(ex.data_split == "train" for ex in tagged) == 43
    from causalcache_lab.selector.split_sizes import MIN_TRAIN_STATES

    with pytest.raises(
        ConfigError, match=rf"43 training states \(the OOD guard needs >= {MIN_TRAIN_STATES}\)"
    ):
        train_selector(tagged, TrainConfig(epochs=1, split_by="metadata"), export_onnx=False)


def test_one_trajectory_explains_the_split(examples) -> None:
    """One recorded thread used to fail with "no training states" (the hash put it in test)."""
    from causalcache_lab.selector.train import TrainConfig, train_selector

    one = [ex for ex in examples if ex.trajectory_id == examples[0].trajectory_id]
    with pytest.raises(ConfigError) as info:
        train_selector(one, TrainConfig(epochs=1), export_onnx=False)
    text = str(info.value)
    assert (
        f"1 trajectory ({len(one)} states)" in text and "split_by: hash, fractions (0.7, 0.15, 0.15)" in text
    )
    assert "label at least" in text and "trajectories" in text.split("label at least")[1]


def test_simulated_policy_is_refused_as_labeller_of_real_data(tmp_path) -> None:
    from selector_synth import DictArchive

    from causalcache_lab.selector.labels import check_labeller, run_labelling
    from causalcache_lab.world import SimulatedPolicy

    trajs, _ = make_trajectories(2, length=8, seed=0)  # not from the synthetic world
    out = tmp_path / "labels.jsonl"
    with pytest.raises(ConfigError, match=r"simulated world policy.*--force-labeller"):
        run_labelling(SimulatedPolicy(), DictArchive(), trajs, out, progress=False, max_states=0)
    assert not out.exists()
    check_labeller(SimulatedPolicy(), trajs, force=True)  # forced: accepted
    world = [dataclasses.replace(t, metadata={"source": "synthetic-expert"}) for t in trajs]
    check_labeller(SimulatedPolicy(), world)  # the synthetic world's own data: accepted
    check_labeller(MarkerPolicy({}), trajs)  # any other policy: accepted
