"""Evaluation across worlds: a row per world, an aggregate per world split, the selector's verdict, and
intervals that resample tasks (a task's score is its mean over seeds)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from causalcache_lab.eval.summary import summarize, summarize_arm
from causalcache_lab.eval.world_agent import EpisodeOutcome


def _outcomes(
    arm: str, pattern: dict[str, list[bool]], split: str = "memory_critical"
) -> list[EpisodeOutcome]:
    return [
        EpisodeOutcome(task, split, arm, 4, ok, 10, 0.1, seed=seed)
        for task, runs in pattern.items()
        for seed, ok in enumerate(runs)
    ]


def _task_bootstrap(scores: np.ndarray, n_boot: int = 20000, seed: int = 12345) -> tuple[float, float]:
    """An independent percentile bootstrap that resamples tasks (scores = one value per task)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    means = scores[rng.integers(0, scores.size, size=(n_boot, scores.size))].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def test_success_interval_resamples_tasks_not_episodes():
    # 10 tasks x 3 seeds; a task succeeds under every seed or under none: the episodes of a task are one
    # observation, so the interval must be that of 10 tasks, not of 30 episodes
    pattern = {f"t{i}": [i < 5] * 3 for i in range(10)}
    cell = summarize_arm(_outcomes("recent", pattern))["memory_critical"]
    task_scores = np.array([np.mean(v) for v in pattern.values()], dtype=float)
    low, high = _task_bootstrap(task_scores)
    assert cell["ci95"][0] == pytest.approx(low, abs=0.06)
    assert cell["ci95"][1] == pytest.approx(high, abs=0.06)
    episodes = np.array([x for v in pattern.values() for x in v], dtype=float)
    e_low, e_high = _task_bootstrap(episodes)  # the same bootstrap over episodes: visibly narrower
    assert (cell["ci95"][1] - cell["ci95"][0]) > (e_high - e_low) + 0.1


def test_paired_contrast_interval_resamples_tasks():
    treat = {f"t{i}": [i < 6] * 3 for i in range(12)}
    base = {f"t{i}": [i < 2 or i >= 9] * 3 for i in range(12)}
    results = summarize(
        _outcomes("causalcache", treat) + _outcomes("recent", base), ["recent", "causalcache"]
    )
    cell = results["contrasts_by_arm"]["causalcache"]["memory_critical"]
    diffs = np.array([np.mean(treat[t]) - np.mean(base[t]) for t in treat], dtype=float)
    low, high = _task_bootstrap(diffs)
    assert cell["delta"] == pytest.approx(diffs.mean())
    assert cell["ci95"][0] == pytest.approx(low, abs=0.06)
    assert cell["ci95"][1] == pytest.approx(high, abs=0.06)


pytest.importorskip("langgraph")


def test_closed_loop_across_worlds_reports_rows_per_world_and_split_aggregates(tmp_path):
    from causalcache_lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop
    from causalcache_lab.eval.report_text import format_table

    settings = ClosedLoopSettings(
        tasks=8, arms=("recent", "first"), policy_seeds=(0,), worlds="dev-00,heldout-01"
    )
    results = run_closed_loop(settings, tmp_path, progress=False)
    assert set(results["world_rows"]) == {"dev-00", "heldout-01"}
    assert list(results["world_splits"]) == ["heldout", "dev"]
    assert results["world_rows"]["heldout-01"]["knobs"]["vocab"] == "command"
    assert {e["world"] for e in results["episodes"]} == {"dev-00", "heldout-01"}
    for split, worlds in (("heldout", ["heldout-01"]), ("dev", ["dev-00"])):
        agg = results["world_splits"][split]
        ids = {e["task_id"] for e in results["episodes"] if e["world"] in worlds}
        assert agg["arms"]["recent"]["all"]["n"] == len(ids) == 4
    text = format_table(results)
    assert "Held-out worlds (heldout-01)" in text and "Development worlds (dev-00)" in text
    assert "First-4" in text


def test_demo_defaults_to_heldout_worlds_and_says_whether_the_selector_gains(tmp_path, capsys):
    from causalcache_memory.cli.main import main

    out = tmp_path / "demo"
    assert main(["demo", "--tasks", "4", "--out", str(out), "--quiet", "--no-plots"]) == 0
    printed = capsys.readouterr().out
    assert "worlds heldout" in printed
    assert "Held-out worlds: the learned selector" in printed
    assert "OOD guard declined" in printed
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(results["world_splits"]) == {"heldout"}
    assert all(e["world"].startswith("heldout-") for e in results["episodes"])


def test_eval_closed_loop_takes_worlds_and_rejects_unknown_ones(tmp_path, capsys):
    from causalcache_memory.cli.main import main

    with pytest.raises(SystemExit):
        main(["eval", "closed-loop", "--worlds", "moon-01", "--out", str(tmp_path)])
    assert "moon-01" in capsys.readouterr().err
