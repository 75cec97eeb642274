from __future__ import annotations

import json
from pathlib import Path

import pytest

from causalcache_lab.selector.recipe import load_recipe
from causalcache_memory.errors import ConfigError

EXAMPLE = Path(__file__).parents[3] / "examples" / "selector_recipe.yaml"
#: the recipe below names a test module's factory: trusted on the command line
TRUST = ["--trust-module", "selector_synth"]


def test_example_recipe_validates():
    recipe = load_recipe(EXAMPLE)
    assert recipe.labels.label_config().budgets == (1, 2, 4)
    assert recipe.ladder_config().budgets == (2, 4) and recipe.ladder.json_path
    pytest.importorskip("torch")
    assert recipe.train_config().epochs == 40


def test_bad_recipe_reports_every_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("labels: {budgets: oops, stride: 0}\nunknown: 1\n")
    with pytest.raises(ConfigError) as info:
        load_recipe(bad)
    assert len(info.value.errors) >= 3


def test_label_train_eval_commands(tmp_path):
    pytest.importorskip("torch")
    from causalcache_memory.cli.main import main

    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        json.dumps(
            {
                "setup": {
                    "factory": "selector_synth:selector_setup",
                    "kwargs": {"n": 8, "length": 12, "archive": str(tmp_path / "archive")},
                },
                "labels": {"output": str(tmp_path / "labels.jsonl"), "budgets": [2]},
                "train": {
                    "output_dir": str(tmp_path / "model"),
                    "epochs": 3,
                    "description": "cli test",
                    "min_train_states": 10,  # a smoke run: 8 trajectories
                    "min_dev_states": 2,
                },
                "ladder": {
                    "budgets": [2],
                    "rules": ["learned", "random", "rgb", "oracle"],
                    "bootstrap": 50,
                    "witness": "gold",
                    "split": "all",
                },
            }
        )
    )
    assert main(["label", "selector", "--recipe", str(recipe), "--no-progress", *TRUST]) == 0
    assert main(["train", "selector", "--recipe", str(recipe), *TRUST]) == 0
    meta = json.loads((tmp_path / "model" / "metadata.json").read_text())
    assert meta["data_description"] == "cli test" and meta["labels"]["labeller"] == "marker-policy"
    out = tmp_path / "ladder.json"
    assert main(["eval", "ladder", "--recipe", str(recipe), "--json", str(out), "--no-progress", *TRUST]) == 0
    report = json.loads(out.read_text())
    assert set(report["results"]) == {"learned", "random", "rgb", "oracle"}
    for rule in report["results"].values():
        assert {"margin", "ci95", "k_profile"} <= set(rule["2"])


def test_recipe_factory_accepts_attribute_paths() -> None:
    from causalcache_lab.selector.recipe import _call
    from causalcache_memory.errors import ConfigError

    policy = _call("causalcache_lab.world.sim_policy:SimulatedPolicy", {"seed": 1}, "policy")
    assert type(policy).__name__ == "SimulatedPolicy"
    parsed = _call("causalcache_memory.actions.model:Action.from_dict", {"data": {"type": "back"}}, "x")
    assert parsed.type == "back"
    with pytest.raises(ConfigError, match="cannot be imported"):
        _call("causalcache_memory.actions.model:Action.nope", {}, "x")
