from __future__ import annotations

import pytest

from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.world import age_histogram, generate_tasks, parse_goal, run_expert, split_of
from causalcache_memory.lab.world.env import WorldState


def test_tasks_are_distinct_deterministic_and_split_by_metadata(mixed_tasks):
    assert len({t.goal + t.platform for t in mixed_tasks}) == len(mixed_tasks)
    assert [t.goal for t in generate_tasks(60, seed=3, platform="mixed")] == [t.goal for t in mixed_tasks]
    splits = {t.split for t in mixed_tasks}
    assert splits == {"memory_critical", "control"}
    for task in mixed_tasks:
        assert task.split == split_of(task.apps)
        if task.split == "memory_critical":
            assert task.value_kind is not None and task.value not in task.goal
            assert len(task.apps) > 1
        else:
            assert len(task.apps) == 1


def test_evidence_ages_straddle_the_recent_4_window():
    tasks = generate_tasks(200, seed=0)
    hist = age_histogram(tasks)
    assert min(hist) <= 3 and max(hist) >= 10
    inside = sum(n for age, n in hist.items() if age <= 4)
    outside = sum(n for age, n in hist.items() if age > 4)
    assert inside > 10 and outside > 10


def test_parse_goal_rejects_unknown_language():
    with pytest.raises(ConfigError, match="templated"):
        parse_goal("Steps: fly to the moon.")
    with pytest.raises(ConfigError, match="Steps"):
        parse_goal("Do something.")


def test_expert_solves_every_task_and_checker_rejects_wrong_values(mixed_tasks):
    for task in mixed_tasks:
        _, world = run_expert(task)
        state = world.state()
        assert task.check(state), task.task_id
        if task.target["output"] == "toggle":
            flipped = {**state.toggles, task.target["key"]: not task.target["on"]}
            assert not task.check(WorldState(state.outputs, flipped, state.steps, True))
        else:
            assert not task.check(state, value=task.value + "9"), task.task_id
    empty = WorldState({"sent": [], "notes": [], "verified": [], "tracked": [], "searched": []}, {}, 0, True)
    assert not any(t.check(empty) for t in mixed_tasks if t.target["output"] != "toggle")


def test_demonstrations_never_leak_the_value_before_it_is_needed(mixed_tasks, archive):
    for task in mixed_tasks:
        if task.split != "memory_critical":
            continue
        traj, _ = run_expert(task, archive)
        assert traj is not None and traj.success
        assert traj.metadata["split"] == "memory_critical"
        assert traj.metadata["evidence_step"] == task.evidence_step
        assert traj.steps[task.evidence_step - 1].metadata["evidence_visible"]
        need = task.need_step
        trace = traj.trace_at(need)
        for event in trace:
            assert task.value not in event.summary
            assert task.value not in event.response
        assert task.value in traj.steps[need - 1].response  # the typing step is where it appears


def test_mixed_platform_does_not_confound_split_with_platform() -> None:
    from collections import Counter

    from causalcache_memory.lab.world import generate_tasks

    counts = Counter((t.platform, t.split) for t in generate_tasks(40, 3, platform="mixed"))
    assert set(counts) == {(p, s) for p in ("mobile", "desktop") for s in ("memory_critical", "control")}
    assert max(counts.values()) - min(counts.values()) <= 2
