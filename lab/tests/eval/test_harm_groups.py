"""Harm groups of the guard studies (``count_harm``, ``harm_rates``), counted once for both tools."""

from __future__ import annotations

import sys
from pathlib import Path

from causalcache_lab.eval.stats import count_harm, harm_rates

TOOLS = Path(__file__).resolve().parents[2] / "tools"


def test_an_episode_is_harmed_or_helped_only_against_its_paired_baseline() -> None:
    groups: dict[str, dict[str, int]] = {"a": {}, "b": {}}
    count_harm(groups["a"], swaps=2, base_success=True, success=False)  # harmed
    count_harm(groups["a"], swaps=1, base_success=False, success=True)  # helped
    count_harm(groups["a"], swaps=0, base_success=True, success=True)  # neither
    count_harm(groups["b"], swaps=3, base_success=False, success=False)  # neither
    out = harm_rates(groups)
    assert list(out) == ["a", "b"]
    assert out["a"] == {
        "episodes": 3,
        "swaps": 3,
        "harmed": 1,
        "helped": 1,
        "harm_rate": 0.333,
        "help_rate": 0.333,
    }
    assert out["b"] == {
        "episodes": 1,
        "swaps": 3,
        "harmed": 0,
        "helped": 0,
        "harm_rate": 0.0,
        "help_rate": 0.0,
    }


def test_the_refit_study_splits_episodes_by_a_refused_swap() -> None:
    sys.path.insert(0, str(TOOLS))
    try:
        import guard_refit_eval
    finally:
        sys.path.remove(str(TOOLS))

    def episode(task: str, arm: str, success: bool, log: list[dict]) -> dict:
        return {"task_id": task, "seed": 0, "arm": arm, "split": "control", "success": success, "log": log}

    episodes = [
        episode("t1", "recent", True, []),
        episode("t1", "causalcache_noguard", False, [{"k": 1, "refuse": True}]),
        episode("t2", "recent", False, []),
        episode("t2", "causalcache_noguard", True, [{"k": 1}, {"k": 0, "refuse": True}]),
    ]
    got = guard_refit_eval.tally(episodes, lambda r: r.get("refuse", False))
    assert (got["swaps"], got["swaps_refused"]) == (2, 1)  # a refusal counts only on a swap
    assert got["episodes"]["refused/control"]["harmed"] == 1
    assert got["episodes"]["accepted/control"]["helped"] == 1
    assert got["episodes"]["refused/all"]["harm_rate"] == 1.0
