"""lab/tools/ext_eval.py pool: runs of one design over several task seeds counted as one run of all tasks."""

from __future__ import annotations

import pytest
from lab_fixtures import lab_tool


@pytest.fixture(scope="module")
def tool():  # type: ignore[no-untyped-def]
    with lab_tool("ext_eval") as module:
        yield module


ARMS = ["recent", "random", "causalcache_try2"]


def _run(task_seed: int, wins: dict[str, list[int]], *, swaps: int = 10) -> dict:  # type: ignore[type-arg]
    """A results dict of 2 memory-critical tasks x 1 policy seed; ``wins[arm]`` = successes per task."""
    episodes = [
        {
            "task_id": f"t-{task_seed}-{i}", "world": "terminal", "split": "memory_critical", "arm": arm,
            "budget": 4, "seed": 101, "success": bool(won), "steps": 5, "wall_s": 0.1,
        }
        for arm, outcome in wins.items()
        for i, won in enumerate(outcome)
    ]  # fmt: skip
    cell = {"could_swap": 20, "declined_ood": 2, "decline_rate": 0.1, "swap_rate": swaps / 20}
    return {
        "meta": {
            "generator": "terminal", "policy": "title-line", "arms": ARMS, "budget": 4,
            "policy_seeds": [101], "tasks_per_split": 1, "task_seed": task_seed, "tasks": 2,
        },
        "episodes": episodes,
        "arms": {a: {s: {"fire_rate": 0.1, "episodes": 2} for s in ("all", "memory_critical", "control")} for a in ARMS},
        "could_swap": {"causalcache_try2": {s: dict(cell) for s in ("all", "memory_critical", "control")}},
    }  # fmt: skip


def test_pooled_deltas_are_over_every_task_of_every_run(tool) -> None:  # type: ignore[no-untyped-def]
    a = _run(7001, {"recent": [0, 0], "random": [1, 0], "causalcache_try2": [1, 1]})
    b = _run(7002, {"recent": [0, 1], "random": [0, 0], "causalcache_try2": [1, 0]}, swaps=4)
    pooled = tool.pool([a, b])
    mc = pooled["contrasts_by_arm"]["causalcache_try2"]["memory_critical"]
    assert mc["n"] == 4 and mc["delta"] == pytest.approx((1 + 1 + 1 - 1) / 4)  # per task: +1 +1 +1 -1
    assert (mc["helped"], mc["harmed"]) == (3, 1)
    vs_random = pooled["contrasts_vs_random"]["causalcache_try2"]["memory_critical"]
    assert vs_random["delta"] == pytest.approx((0 + 1 + 1 + 0) / 4)
    assert pooled["arms"]["causalcache_try2"]["memory_critical"]["success"] == pytest.approx(3 / 4)
    cs = pooled["could_swap"]["causalcache_try2"]["memory_critical"]
    assert (cs["could_swap"], cs["declined_ood"], cs["swap_rate"]) == (40, 4, pytest.approx(14 / 40))
    assert pooled["meta"]["task_seed"] == [7001, 7002] and pooled["meta"]["tasks"] == 4


def test_one_run_pooled_is_that_run(tool) -> None:  # type: ignore[no-untyped-def]
    a = _run(7001, {"recent": [0, 1], "random": [1, 0], "causalcache_try2": [1, 1]})
    mc = tool.pool([a])["contrasts_by_arm"]["causalcache_try2"]["memory_critical"]
    assert mc["delta"] == pytest.approx(0.5) and (mc["helped"], mc["harmed"]) == (1, 0)


def test_runs_of_different_designs_or_repeated_task_seeds_are_refused(tool) -> None:  # type: ignore[no-untyped-def]
    a = _run(7001, {"recent": [0, 0], "random": [0, 0], "causalcache_try2": [1, 1]})
    other = _run(7002, {"recent": [0, 0], "random": [0, 0], "causalcache_try2": [1, 1]})
    other["meta"]["policy"] = "noisy"
    with pytest.raises(SystemExit, match="differ in policy"):
        tool.pool([a, other])
    with pytest.raises(SystemExit, match="repeat"):
        tool.pool([a, a])


def test_a_generator_row_pools_across_policies_only_when_asked(tool) -> None:  # type: ignore[no-untyped-def]
    a = _run(7001, {"recent": [0, 0], "random": [0, 1], "causalcache_try2": [1, 1]})
    b = _run(7002, {"recent": [0, 0], "random": [0, 0], "causalcache_try2": [1, 0]})
    c = _run(7003, {"recent": [1, 0], "random": [0, 0], "causalcache_try2": [1, 0]})
    b["meta"]["policy"], c["meta"]["policy"] = "noisy", "title-line"
    with pytest.raises(SystemExit, match="differ in policy"):
        tool.pool([a, b, c])
    pooled = tool.pool([a, b, c], across_policies=True)
    assert pooled["meta"]["policy"] == "title-line+noisy"  # a's and c's policy counted once, in run order
    mc = pooled["contrasts_by_arm"]["causalcache_try2"]["memory_critical"]
    assert mc["n"] == 6 and (mc["helped"], mc["harmed"]) == (3, 0)
    b["meta"]["budget"] = 3
    with pytest.raises(SystemExit, match="differ in budget"):
        tool.pool([a, b], across_policies=True)
