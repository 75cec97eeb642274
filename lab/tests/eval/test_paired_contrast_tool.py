"""lab/tools/paired_contrast.py: arm-vs-arm contrasts across closed-loop runs (RESULTS.md, section 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tool(load_tool):
    return load_tool("paired_contrast")


def _results(path: Path, arms: dict[str, dict[str, list[bool]]], budget: int = 4) -> Path:
    """``arms``: arm -> task id -> successes under seeds 0, 1, ... (task ids starting with 'm' are
    memory-critical)."""
    episodes = [
        {
            "task_id": task,
            "split": "memory_critical" if task.startswith("m") else "control",
            "arm": arm,
            "budget": 0 if arm == "summary_only" else budget,
            "seed": seed,
            "success": ok,
        }
        for arm, tasks in arms.items()
        for task, runs in tasks.items()
        for seed, ok in enumerate(runs)
    ]
    path.write_text(json.dumps({"meta": {"budget": budget}, "episodes": episodes}))
    return path


def test_contrast_is_treatment_minus_control_over_seed_means(tool, tmp_path) -> None:
    a = _results(
        tmp_path / "a.json",
        {
            "causalcache": {"m1": [1, 1, 0], "m2": [1, 1, 1], "m3": [0, 0, 0], "c1": [1, 1, 1]},
            # another budget of the same arm must not leak into the B=4 scores
            "recent": {"m1": [0, 0, 0], "m2": [0, 0, 0], "m3": [0, 0, 0], "c1": [1, 1, 1]},
        },
    )
    b = _results(
        tmp_path / "b.json", {"random": {"m1": [0, 0, 1], "m2": [1, 1, 1], "m3": [1, 0, 0], "c1": [1, 0, 1]}}
    )
    out = tool.contrast(f"{a}:causalcache", f"{b}:random")
    mc = out["memory_critical"]
    # per-task differences: m1 2/3 - 1/3, m2 0, m3 0 - 1/3 -> mean 0
    assert mc["delta"] == pytest.approx(0.0, abs=1e-4)
    assert (mc["n"], mc["helped"], mc["harmed"]) == (3, 1, 1)
    ctrl = out["control"]
    assert ctrl["delta"] == pytest.approx(1 / 3, abs=1e-4) and (ctrl["helped"], ctrl["harmed"]) == (1, 0)
    assert out["all"]["n"] == 4 and out["policy_seeds"] == [0, 1, 2]
    reverse = tool.contrast(f"{b}:random", f"{a}:causalcache")
    assert reverse["control"]["delta"] == pytest.approx(-1 / 3, abs=1e-4)
    assert reverse["control"]["ci95"][1] <= 0.0


def test_runs_on_other_tasks_or_seeds_are_refused(tool, tmp_path) -> None:
    a = _results(tmp_path / "a.json", {"causalcache": {"m1": [1, 1], "c1": [1, 1]}})
    other_seeds = _results(tmp_path / "b.json", {"random": {"m1": [1, 1, 0], "c1": [1, 1, 1]}})
    other_tasks = _results(tmp_path / "c.json", {"random": {"m2": [1, 1], "c1": [1, 1]}})
    for control in (other_seeds, other_tasks):
        with pytest.raises(SystemExit, match="same tasks under the same policy seeds"):
            tool.contrast(f"{a}:causalcache", f"{control}:random")
    with pytest.raises(SystemExit, match="no episodes of arm 'oracle'"):
        tool.contrast(f"{a}:oracle", f"{a}:causalcache")
