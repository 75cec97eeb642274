"""The expert of the external-style worlds: plays a task's plan with the true values.

:func:`play` returns the screens the expert saw, one per event (``screens[0]`` is the first screen
``x_1``; ``screens[j]`` is ``v_j``, the screen after action ``j``), the actions, and the final world --
what the tests use to check where a task's evidence sits.
"""

from __future__ import annotations

from dataclasses import dataclass

from causalcache_lab.worlds_ext.env import ExtWorld
from causalcache_lab.worlds_ext.screen import Element, Screen
from causalcache_lab.worlds_ext.tasks import ExtTask, PlanStep
from causalcache_memory.actions.model import Action

__all__ = ["Play", "expert_action", "play"]


@dataclass(frozen=True)
class Play:
    """One expert episode: the screens (``x_1``, then ``v_1 .. v_T``), the actions and the final world."""

    screens: tuple[Screen, ...]
    actions: tuple[Action, ...]
    world: ExtWorld


def _at(kind: str, e: Element, size: tuple[int, int], **kw: str | None) -> Action:
    w, h = size
    return Action(kind, x=(e.box[0] + e.box[2]) / 2 / w, y=(e.box[1] + e.box[3]) / 2 / h, **kw)  # type: ignore[arg-type]


def expert_action(task: ExtTask, step: PlanStep, screen: Screen) -> Action:
    """The expert's action for plan ``step`` on ``screen`` (typing the true value)."""
    if step.op == "open_app":
        return Action("open_app", text=step.label, target=step.label)
    if step.op == "scroll":
        return Action("scroll", direction="down")
    if step.op == "done":
        return Action("done", status="success")
    if step.op == "click":
        e = next((e for e in screen.elements if e.text == step.label and e.on_click), None)
        return Action("wait") if e is None else _at("click", e, screen.size, target=step.label)
    fld = next((e for e in screen.elements if e.on_click == f"field:{step.field}"), None)
    text = step.text if step.text is not None else task.target[2]
    return Action("wait") if fld is None else _at("type", fld, screen.size, target=step.field, text=text)


def play(task: ExtTask) -> Play:
    """Play ``task``'s plan with the true values."""
    world = ExtWorld(task)
    screens = [world.screen()]
    actions = []
    for step in task.steps:
        action = expert_action(task, step, screens[-1])
        world.step(action)
        actions.append(action)
        screens.append(world.screen())
    return Play(tuple(screens), tuple(actions), world)
