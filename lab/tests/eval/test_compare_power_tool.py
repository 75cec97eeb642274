"""lab/tools/compare_power.py: simulated live comparisons of a paired closed loop (RESULTS.md 9l)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def tool(load_tool):
    return load_tool("compare_power")


def _results(path: Path, outcomes: list[tuple[bool, list[dict]]]) -> str:
    """One arm's episodes: ``(success, swaps)`` per task, seed 0."""
    episodes = [
        {"task_id": f"task-{i}", "seed": 0, "arm": "causalcache", "split": "memory_critical",
         "success": ok, "swaps": swaps, "k": [len(s["restored"]) for s in swaps]}
        for i, (ok, swaps) in enumerate(outcomes)
    ]  # fmt: skip
    path.write_text(json.dumps({"episodes": episodes}), encoding="utf-8")
    return str(path)


def test_triggered_episodes_carry_the_difference_and_judge_it_sooner(tool, tmp_path):
    # 60 triggered episodes (the deployed arm restored another screen): it wins 45, the compared 15;
    # 240 untriggered ones end the same under both, half of them successes
    swap = lambda r: [{"t": 9, "restored": [r]}]  # noqa: E731
    deployed = [(i < 45, swap(2)) for i in range(60)] + [(i % 2 == 0, []) for i in range(240)]
    compared = [(i < 15, swap(5)) for i in range(60)] + [(i % 2 == 0, []) for i in range(240)]
    row = tool.power(
        _results(tmp_path / "d.json", deployed), _results(tmp_path / "c.json", compared), splits=20
    )
    assert row["episodes"] == 300 and row["trigger_share"] == pytest.approx(0.2)
    assert row["paired_delta"] == pytest.approx(30 / 300)
    assert row["episodes_ratio"] > 2.0  # the untriggered episodes' noise is gone
    assert row["triggered"]["better"] > row["all"]["better"] and row["triggered"]["worse"] == 0.0


def test_runs_of_other_episodes_are_refused(tool, tmp_path):
    a = _results(tmp_path / "a.json", [(True, [])] * 5)
    b = _results(tmp_path / "b.json", [(True, [])] * 4)
    with pytest.raises(SystemExit, match="different episodes"):
        tool.power(a, b, splits=2)
    with pytest.raises(SystemExit, match="no episodes of arm 'random'"):
        tool.episodes(f"{a}:random")
