"""The closed-loop harness and `causalcache demo` on a handful of synthetic-world tasks."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langgraph")

from causalcache_memory.cli.main import main
from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop


def test_demo_writes_results_and_report(tmp_path, capsys) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--tasks", "6", "--out", str(out), "--quiet", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "Recent-4" in printed and "CausalCache" in printed
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    for arm in ("recent", "causalcache"):
        for split in ("all", "memory_critical", "control"):
            cell = results["arms"][arm][split]
            assert 0.0 <= cell["success"] <= 1.0 and len(cell["ci95"]) == 2
    for split in ("all", "memory_critical", "control"):
        assert set(results["contrasts"][split]) >= {"delta", "ci95"}
    assert results["meta"]["tasks"] == 6 and results["meta"]["command"].startswith("causalcache")
    assert len(results["episodes"]) == 12
    assert results["arms"]["recent"]["k_profile"] == {"0": 1.0}  # Recent-B never displaces
    assert results["arms"]["recent"]["fire_rate"] is None  # single pass
    assert results["arms"]["causalcache"]["fire_rate"] is not None  # two-pass arm
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "CausalCache" in html and "Memory-critical" in html


def test_arms_share_tasks_and_summary_only_never_shows_history(tmp_path) -> None:
    settings = ClosedLoopSettings(tasks=4, arms=("summary_only", "recent"), seed=7)
    results = run_closed_loop(settings, tmp_path, progress=False)
    by_arm: dict[str, list[str]] = {}
    for ep in results["episodes"]:
        by_arm.setdefault(ep["arm"], []).append(ep["task_id"])
    assert by_arm["summary_only"] == by_arm["recent"]  # paired design: the same tasks in the same order
    assert all(ep["budget"] == 0 for ep in results["episodes"] if ep["arm"] == "summary_only")
    assert results["contrasts"] == {}  # no causalcache arm: no causalcache − recent contrast
    assert results["contrasts_by_arm"]["summary_only"]["all"]["n"] == 4


def test_bad_settings_are_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown arm"):
        ClosedLoopSettings(arms=("recent", "smart"))
    with pytest.raises(ConfigError, match="tasks"):
        ClosedLoopSettings(tasks=0)
    with pytest.raises(ConfigError, match="min_gain"):
        ClosedLoopSettings(min_gain=-1.0)


def test_eval_closed_loop_command_sweeps_budgets(tmp_path) -> None:
    out = tmp_path / "cl"
    args = [
        "eval",
        "closed-loop",
        "--tasks",
        "2",
        "--arms",
        "summary_only,recent",
        "--budget-curve",
        "0,1",
        "--out",
        str(out),
        "--quiet",
        "--no-plots",
    ]
    assert main(args) == 0
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert results["budget_curve"]["budgets"] == [0, 1]
    assert set(results["arms"]) == {"summary_only", "recent"}
