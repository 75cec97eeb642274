"""The closed-loop harness and `causalcache demo` on a handful of synthetic-world tasks."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langgraph")

from causalcache_memory.cli.main import main
from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop


def _mean(xs) -> float | None:
    xs = [float(x) for x in xs]
    return sum(xs) / len(xs) if xs else None


def _check_numbers_against_episodes(results: dict) -> None:
    """Every success rate and contrast in ``results.json`` recomputed by hand from its episodes."""
    budget, episodes = results["meta"]["budget"], results["episodes"]
    main = [e for e in episodes if e["budget"] == budget or e["arm"] == "summary_only"]

    def rows(arm: str, split: str) -> list[dict]:
        return [e for e in main if e["arm"] == arm and split in ("all", e["split"])]

    for arm, cells in results["arms"].items():
        for split in ("all", "memory_critical", "control"):
            expected = [e["success"] for e in rows(arm, split)]
            assert cells[split]["n"] == len(expected) > 0
            assert cells[split]["success"] == pytest.approx(_mean(expected))
    for split, contrast in results["contrasts"].items():
        if split == "interaction":
            continue
        treat = {e["task_id"]: e["success"] for e in rows("causalcache", split)}
        ctrl = {e["task_id"]: e["success"] for e in rows("recent", split)}
        assert set(treat) == set(ctrl) and contrast["n"] == len(treat)
        assert contrast["delta"] == pytest.approx(_mean(treat[t] - ctrl[t] for t in treat))


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
    _check_numbers_against_episodes(results)
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
    _check_numbers_against_episodes(results)
    episodes = results["episodes"]
    assert results["budget_curve"]["arms"], "the budget curve has no series"
    for arm, series in results["budget_curve"]["arms"].items():
        for split, values in series.items():
            assert len(values) == 2
            for budget, value in zip([0, 1], values, strict=True):
                b = 0 if arm == "summary_only" else budget
                sel = [
                    e["success"]
                    for e in episodes
                    if e["arm"] == arm and e["budget"] == b and split in ("all", e["split"])
                ]
                assert value == pytest.approx(_mean(sel)) if sel else value is None
