"""The external-style world's step semantics: apps, clicks, forms, scrolling, and the oracle's ground truth."""

from __future__ import annotations

from causalcache_lab.worlds_ext import generate_ext_tasks
from causalcache_lab.worlds_ext.env import ExtWorld
from causalcache_lab.worlds_ext.expert import expert_action
from causalcache_lab.worlds_ext.tasks import PlanStep
from causalcache_memory.actions.model import Action


def _click(world: ExtWorld, label: str) -> None:
    world.step(expert_action(world.task, PlanStep("click", label=label), world.screen()))


def test_a_form_submits_only_what_was_typed_into_its_fields():
    task = generate_ext_tasks("desktop", 2, 1)[1]
    app = task.target[0]
    world = ExtWorld(task)
    world.step(Action("open_app", text=app))
    _click(world, "New entry")
    assert world.s.view == "form"
    world.step(Action("type", x=0.99, y=0.99, text="nowhere"))  # not on a field: ignored
    world.step(expert_action(task, PlanStep("type", field="Note", text="hello"), world.screen()))
    _click(world, "Submit")
    assert world.state()["submitted"] == [(app, {"Note": "hello"})]
    assert world.s.view == "home"


def test_unknown_apps_and_clicks_off_targets_change_nothing():
    world = ExtWorld(generate_ext_tasks("mobile", 1, 0)[0])
    world.step(Action("open_app", text="Nonexistent"))
    assert world.s.app == "" and world.app == "Home"
    world.step(Action("click", x=0.5, y=0.99))  # the bottom navigation: not a target
    assert world.s.view == "launcher" and world.steps == 2


def test_web_lists_page_by_scrolling_and_stop_at_the_last_page():
    task = next(t for t in generate_ext_tasks("web", 12, 0) if any(len(a.listing) > 48 for a in t.apps))
    app = next(a for a in task.apps if len(a.listing) > 48)
    world = ExtWorld(task)
    world.step(Action("open_app", text=app.name))
    first = {e.text for e in world.screen().elements if e.on_click and e.on_click.startswith("open:")}
    pages = (len(app.listing) - 1) // 48
    for _ in range(pages + 3):
        world.step(Action("scroll", direction="down"))
    assert world.s.scroll == pages
    last = {e.text for e in world.screen().elements if e.on_click and e.on_click.startswith("open:")}
    assert not first & last and last <= set(app.listing)


def test_the_evidence_flag_is_set_exactly_on_screens_showing_the_needed_value():
    task = next(t for t in generate_ext_tasks("desktop", 4, 2) if t.split == "memory_critical")
    world = ExtWorld(task)
    flags = []
    for step in task.steps:
        _, info = world.step(expert_action(task, step, world.screen()))
        flags.append(bool(info.evidence))
    assert flags[task.evidence_event - 1]
    assert not any(flags[task.evidence_event : task.use_event - 1])
