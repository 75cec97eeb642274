"""The agreement labels stage reports how often the labeller reproduces the recorded actions under
Recent-B, and warns when it mostly does not (a labeller that disagrees with its own agent labels noise)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_core")
sys.path.insert(0, str(Path(__file__).parent))
from scripted import record_scripted

from causalcache_lab.learn import load_learn_config, run_learn


def _script() -> dict[str, list[str]]:
    points = [(652, 392), (40, 760), (1210, 35), (333, 512), (900, 120), (75, 80), (1000, 700)]
    return {f"task {e}": [f"Action: pyautogui.click({x + e}, {y})" for x, y in points] for e in range(4)}


@pytest.mark.parametrize(("coords", "warned"), [("auto", False), ("thousand", True)])
def test_anchor_agreement_is_reported_and_a_mismatched_labeller_warned(
    tmp_path: Path, coords: str, warned: bool
) -> None:
    rec = record_scripted(tmp_path / "rec", _script())  # a pixel agent
    (tmp_path / "script.json").write_text(json.dumps(_script()))
    cfg = load_learn_config(
        None,
        output=str(tmp_path / "out"),
        data={"threads": {"checkpointer": str(rec.checkpointer), "archive": rec.archive}},
        labeller={
            "factory": "scripted:replay_labeller",
            "kwargs": {"script": str(tmp_path / "script.json"), "coords": coords},
        },
        sources={"agreement": 1.0},
        agreement={"k": 1, "temperature": None},
        labels={"budgets": [2], "path_length": 0, "all_slots": False, "max_states_per_trajectory": 2},
        train={"splits": [0.5, 0.5, 0.0], "min_train_states": 1, "min_dev_states": 1},
        deploy={"budget": 2},
    )
    lines: list[str] = []
    summary = run_learn(cfg, stop_after="labels", progress=False, log=lines.append)
    stage = summary["stages"]["labels-agreement"]
    if warned:  # the right model read with the wrong convention: pixel clicks taken as the 0-1000 grid
        assert stage["anchor_agreement"] < 0.5 and stage["warnings"]
        assert any("reproduces the recorded action in only" in line for line in lines)
    else:
        assert stage["anchor_agreement"] == 1.0 and not stage["warnings"]
