from __future__ import annotations

import math

import pytest

from causalcache_memory.allocation import make_allocation, recent_b
from causalcache_memory.lab.world import SimulatedPolicy, generate_tasks, run_expert
from causalcache_memory.policy import Policy
from causalcache_memory.render import render_prompt


@pytest.fixture(scope="module")
def far_task():
    """A memory-critical task whose evidence is outside Recent-4 at the need step."""
    return next(t for t in generate_tasks(80, seed=5) if t.split == "memory_critical" and t.evidence_age >= 6)


def _prompts(task, archive):
    traj, _ = run_expert(task, archive)
    t = task.need_step
    trace = traj.trace_at(t)
    recent = recent_b(t, 4)
    with_evidence = make_allocation([*recent[1:], task.evidence_step], t=t, budget=4, allocator="oracle")
    without = make_allocation(recent, t=t, budget=4, allocator="recent")
    target = traj.steps[t - 1].response
    return (
        render_prompt(trace, with_evidence).bind(archive),
        render_prompt(trace, without).bind(archive),
        target,
    )


def test_is_a_policy():
    assert isinstance(SimulatedPolicy(), Policy)


def test_types_the_value_only_when_the_evidence_is_in_the_prompt(far_task, archive):
    present, absent, _ = _prompts(far_task, archive)
    policy = SimulatedPolicy()
    good = policy.generate(present)
    bad = policy.generate(absent)
    assert good.action.type == "type" and good.action.text == far_task.value
    assert bad.action.type == "type" and bad.action.text != far_task.value
    assert good.meta["evidence_event"] == far_task.evidence_step
    assert good.action == SimulatedPolicy().generate(present).action  # deterministic given the prompt


def test_score_prefers_the_target_when_the_evidence_is_present(far_task, archive):
    present, absent, target = _prompts(far_task, archive)
    policy = SimulatedPolicy()
    s_present, s_absent = policy.score([present, absent], [target, target])
    assert s_present > s_absent + 0.5
    assert s_present > -0.2 and all(math.isfinite(s) for s in (s_present, s_absent))
    wrong = target.replace(
        far_task.value, far_task.value[::-1] if far_task.value[::-1] != far_task.value else "x"
    )
    assert policy.score([present], [wrong])[0] < s_present
    # batch and single agree, and a fresh instance gives the same numbers
    fresh = SimulatedPolicy()
    assert fresh.score([absent], [target]) + fresh.score([present], [target]) == [s_absent, s_present]


def test_scores_navigation_targets_and_continuity(mixed_tasks, archive):
    task = next(t for t in mixed_tasks if t.split == "control")
    traj, _ = run_expert(task, archive)
    t = next(i for i, s in enumerate(traj.steps, 1) if i >= 3 and s.action.type == "click")
    trace = traj.trace_at(t)
    target = traj.steps[t - 1].response
    full = render_prompt(trace, make_allocation(recent_b(t, 4), t=t, budget=4, allocator="r")).bind(archive)
    none = render_prompt(trace, make_allocation([], t=t, budget=0, allocator="s")).bind(archive)
    policy = SimulatedPolicy()
    s_full, s_none = policy.score([full, none], [target, target])
    assert s_full > s_none  # seeing the latest screens raises confidence a little
    assert s_full - s_none < 0.2
    assert policy.score([full], ["not an action at all"])[0] < -10


def test_recovers_from_a_visible_misclick(archive):
    from causalcache_memory.actions import Action
    from causalcache_memory.lab.world import GuiWorld
    from causalcache_memory.lab.world.expert import element_action
    from causalcache_memory.trace import Trace

    task = next(t for t in generate_tasks(20, seed=1) if t.family == "control:send")
    world = GuiWorld(task)
    trace = Trace(task.goal, platform=task.platform)
    trace.observe(archive.put(world.screenshot()))
    png, info = world.step(Action("open_app", text="Messages", target="Messages"))
    trace.record(Action("open_app", text="Messages", target="Messages"), "r", archive.put(png), app=info.app)
    planned = {s.label for s in task.steps}
    wrong = next(e for e in world.screen().elements if e.kind == "item" and e.label not in planned)
    action = element_action("click", wrong, world.size, target=wrong.label)
    png, info = world.step(action)
    trace.record(action, "r", archive.put(png), app=info.app)
    prompt = render_prompt(trace, make_allocation(recent_b(trace.t, 4), t=trace.t, budget=4, allocator="r"))
    generation = SimulatedPolicy().generate(prompt.bind(archive))
    assert generation.action.type == "back"
    assert "Action:" in generation.response
