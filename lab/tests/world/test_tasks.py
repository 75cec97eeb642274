"""World v2 tasks: intent goals without plans, same-pattern distractors, several grammars, evidence
position not fixed, checkers that reject wrong values, demonstrations that do not leak values."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from causalcache_lab.world import (
    VALUE_KINDS,
    age_histogram,
    generate_tasks,
    plan_goal,
    run_expert,
    split_of,
)
from causalcache_lab.world.env import GuiWorld, WorldState
from causalcache_lab.world.expert import expert_action
from causalcache_memory.errors import ConfigError


def test_tasks_are_distinct_deterministic_and_split_by_metadata(mixed_tasks):
    assert len({(t.goal, t.platform, t.world_seed) for t in mixed_tasks}) == len(mixed_tasks)
    memory_goals = [t.goal for t in mixed_tasks if t.split == "memory_critical"]
    assert len(set(memory_goals)) == len(memory_goals)  # memory goals are long and varied
    assert [t.goal for t in generate_tasks(60, seed=3, platform="mixed")] == [t.goal for t in mixed_tasks]
    assert {t.split for t in mixed_tasks} == {"memory_critical", "control"}
    for task in mixed_tasks:
        assert task.split == split_of(task.apps)
        if task.split == "memory_critical":
            secret = task.target["contact"] if task.family.startswith("pick:") else task.value
            assert task.value_kind is not None and secret not in task.goal
            assert len(task.apps) > 1
        else:
            assert len(task.apps) == 1


def test_goals_state_intent_not_a_plan(mixed_tasks):
    plan_words = re.compile(r"Steps:|\btap\b|go back|\bopen [A-Z]|;")
    for task in mixed_tasks:
        assert not plan_words.search(task.goal), task.goal
        assert len(task.steps) > task.goal.count(". ") + 1  # the planner adds the how


def test_several_grammars_needs_and_two_screen_tasks():
    tasks = generate_tasks(200, seed=0)
    grammars = Counter(t.family.split(":")[0] for t in tasks if t.split == "memory_critical")
    assert set(grammars) == {"single", "inapp", "pick", "pair"}
    need_ops = Counter(t.steps[t.need_step - 1].op for t in tasks if t.split == "memory_critical")
    assert need_ops["click"] > 0 and need_ops["type"] > 0  # picking a person, not only typing
    pairs = [t for t in tasks if t.family.startswith("pair:")]
    assert pairs and all(len(t.metadata["evidence_steps"]) == 2 for t in pairs)
    assert all(len(t.evidence_lines) == 2 and " " in t.value for t in pairs if t.target["output"] != "sent")


def test_distractors_of_the_same_pattern_are_shown_on_other_screens(archive):
    """Most memory tasks show, on some screen other than the evidence, a value of the needed pattern that
    belongs to another item; in-app tasks always do, after the evidence and in the same app."""
    tasks = [t for t in generate_tasks(60, seed=1) if t.split == "memory_critical"]
    with_distractor = 0
    for task in tasks:
        world = GuiWorld(task)
        pattern = VALUE_KINDS[task.value_kind].pattern
        seen_after: list[tuple[str, str]] = []
        for i, step in enumerate(task.steps, 1):
            world.step(expert_action(world, step, task.value, task.target.get("contact")))
            texts = world.screen().texts()
            values = [m.group(1) for x in texts for m in [pattern.search(x)] if m]
            needed = task.value.split(" ") if task.target.get("contact") != task.value else []
            others = [v for v in values if v not in needed and v != task.target.get("contact")]
            if others and i not in task.metadata["evidence_steps"]:
                seen_after.append((world.app, others[0]))
        with_distractor += bool(seen_after)
        if task.family.startswith("inapp:"):
            assert seen_after, task.goal
    assert with_distractor >= len(tasks) // 2


def test_evidence_position_and_age_vary():
    tasks = [t for t in generate_tasks(300, seed=0) if t.split == "memory_critical"]
    hist = age_histogram(tasks)
    assert min(hist) <= 3 and max(hist) >= 10
    inside = sum(n for age, n in hist.items() if age <= 4)
    assert 0 < inside < len(tasks) // 2
    early = sum(t.evidence_step <= 4 for t in tasks)  # what First-4 could hold by position
    assert 0 < early < 0.6 * len(tasks)


def test_plan_goal_rejects_unknown_language():
    with pytest.raises(ConfigError, match="not in the synthetic world's language"):
        plan_goal("Fly to the moon.")
    with pytest.raises(ConfigError, match="which no earlier sentence finds"):
        plan_goal("Send the room to Alice in Messages.")


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
        assert traj.metadata["evidence_step"] == task.evidence_step
        assert traj.steps[task.evidence_step - 1].metadata["evidence_visible"]
        secret = task.target["contact"] if task.family.startswith("pick:") else task.value
        for event in traj.trace_at(task.need_step):
            assert secret not in event.summary and secret not in event.response
        used = traj.steps[task.need_step - 1]  # the step that uses it: types it or taps it
        assert secret in used.response or used.action.target == secret


def test_mixed_platform_does_not_confound_split_with_platform() -> None:
    counts = Counter((t.platform, t.split) for t in generate_tasks(40, 3, platform="mixed"))
    assert set(counts) == {(p, s) for p in ("mobile", "desktop") for s in ("memory_critical", "control")}
    assert max(counts.values()) - min(counts.values()) <= 2
