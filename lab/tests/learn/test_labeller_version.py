"""The labels stage's identity includes the labeller's version (issue 55, item 2)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from causalcache_lab.learn import load_learn_config, run_learn
from causalcache_lab.learn.labeller_version import labeller_version
from causalcache_memory.errors import ConfigError

pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).parent))

_MODULE = """
import helpers

{declared}

def make():  # {comment}
    return helpers.world_labeller()
"""


def _write(folder: Path, name: str, *, declared: str = "", comment: str = "v1") -> None:
    (folder / f"{name}.py").write_text(_MODULE.format(declared=declared, comment=comment))


def _config(tmp_path: Path, recorded, module: str):  # type: ignore[no-untyped-def]
    return load_learn_config(
        None,
        output=str(tmp_path / "out"),
        data={
            "threads": {
                "checkpointer": str(recorded.checkpointer),
                "archive": str(recorded.archive),
                "source": "synthetic-world",
            }
        },
        labeller={"factory": f"{module}:make"},
        labels={"budgets": [2], "path_length": 0, "all_slots": False, "max_states_per_trajectory": 1},
        train={"splits": [0.5, 0.5, 0.0], "min_train_states": 2, "min_dev_states": 1},
        deploy={"budget": 2},
    )


@pytest.fixture
def module_dir(tmp_path: Path):  # type: ignore[no-untyped-def]
    folder = tmp_path / "mods"
    folder.mkdir()
    sys.path.insert(0, str(folder))
    yield folder
    sys.path.remove(str(folder))


def test_a_changed_labeller_source_relabels(recorded, tmp_path: Path, module_dir: Path) -> None:
    import helpers

    _write(module_dir, "labmod_source")
    cfg = _config(tmp_path, recorded, "labmod_source")
    helpers.CALLS["labeller"] = 0
    first = run_learn(cfg, stop_after="labels", progress=False)
    assert not first["stages"]["labels-teacher_forced"]["up_to_date"] and helpers.CALLS["labeller"] == 1
    again = run_learn(cfg, stop_after="labels", progress=False)
    assert again["stages"]["labels-teacher_forced"]["up_to_date"] and helpers.CALLS["labeller"] == 1

    _write(module_dir, "labmod_source", comment="v2: the parser reads pixels now")  # same name and kwargs
    changed = run_learn(cfg, stop_after="labels", progress=False)
    assert not changed["stages"]["labels-teacher_forced"]["up_to_date"]
    assert helpers.CALLS["labeller"] == 2  # relabelled with the new code
    assert any("the labeller changed" in n and "relabelling" in n for n in changed["notes"])


def test_a_declared_version_decides(recorded, tmp_path: Path, module_dir: Path) -> None:
    import helpers

    _write(module_dir, "labmod_declared", declared="LABELLER_VERSION = '1'")
    cfg = _config(tmp_path, recorded, "labmod_declared")
    helpers.CALLS["labeller"] = 0
    run_learn(cfg, stop_after="labels", progress=False)
    assert labeller_version("labmod_declared:make") == {"version": "1", "from": "declared"}
    # an edit that keeps the declared version keeps the labels (the team said nothing changed) ...
    _write(module_dir, "labmod_declared", declared="LABELLER_VERSION = '1'", comment="a comment")
    kept = run_learn(cfg, stop_after="labels", progress=False)
    assert kept["stages"]["labels-teacher_forced"]["up_to_date"] and helpers.CALLS["labeller"] == 1
    # ... and a bumped one relabels
    _write(module_dir, "labmod_declared", declared="LABELLER_VERSION = '2'", comment="a comment")
    sys.modules.pop("labmod_declared")  # the version is read from the module, as a new process would
    bumped = run_learn(cfg, stop_after="labels", progress=False)
    assert not bumped["stages"]["labels-teacher_forced"]["up_to_date"] and helpers.CALLS["labeller"] == 2


def test_a_labeller_without_a_version_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigError, match=r"declare one: set labeller_version = '1' on the factory"):
        labeller_version("builtins:dict")
    assert labeller_version("helpers:world_labeller")["from"] == "source"


def test_labels_from_before_the_version_are_kept_once_and_said(
    recorded, tmp_path: Path, module_dir: Path
) -> None:
    """A labels stage written before its identity held the version (same other inputs) is not relabelled
    on upgrade; the run says how to relabel. A later change of the labeller relabels as usual."""
    import json

    import helpers

    from causalcache_lab.learn.stages import inputs_hash

    _write(module_dir, "labmod_legacy")
    cfg = _config(tmp_path, recorded, "labmod_legacy")
    helpers.CALLS["labeller"] = 0
    run_learn(cfg, stop_after="labels", progress=False)
    manifest = tmp_path / "out" / "labels-teacher_forced" / "manifest.json"
    old = json.loads(manifest.read_text())
    legacy = {k: v for k, v in old["inputs"].items() if k != "labeller_version"}
    manifest.write_text(json.dumps({**old, "inputs": legacy, "inputs_hash": inputs_hash(legacy)}))
    kept = run_learn(cfg, stop_after="labels", progress=False)
    assert kept["stages"]["labels-teacher_forced"]["up_to_date"] and helpers.CALLS["labeller"] == 1
    assert any("labelled before learn recorded the labeller's version" in n for n in kept["notes"])
    _write(module_dir, "labmod_legacy", comment="v2")
    relabelled = run_learn(cfg, stop_after="labels", progress=False)
    assert not relabelled["stages"]["labels-teacher_forced"]["up_to_date"] and helpers.CALLS["labeller"] == 2
