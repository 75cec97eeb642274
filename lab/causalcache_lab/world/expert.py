"""The expert: executes a task's plan with ground-truth element boxes and records demonstrations.

The expert reads the world's element tree (not pixels), so it never misclicks; its responses are
``compose_response(thought, action)`` in the JSON action format with absolute pixel coordinates, and its
actions carry ``target`` labels so the default summarizer writes ``click (270, 292) "Orders" [Shop]``.
Thoughts and labels never name a remembered value before the step that types it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_lab.world.env import GuiWorld
from causalcache_lab.world.render import Element
from causalcache_lab.world.tasks import PlanStep, Task
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import CausalCacheError

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = [
    "element_action",
    "expert_action",
    "generate_demonstrations",
    "respond",
    "run_expert",
    "thought_for",
]


def respond(thought: str, action: Action, screen_size: tuple[int, int]) -> str:
    """The canonical response text: ``Thought: ...`` plus a JSON action in absolute pixels."""
    from causalcache_memory.actions import compose_response

    return compose_response(thought, action, fmt="json", screen_size=screen_size, coords="absolute")


def thought_for(step: PlanStep) -> str:
    """A short thought for a plan step; never contains a remembered value."""
    if step.op == "open_app":
        return f"I need the {step.app} app."
    if step.op == "click":
        return f"I will tap {step.label or 'the person I found'}."
    if step.op == "type":
        what = f"'{step.text}'" if step.text else "what I found"
        return f"I will type {what} into {step.label}."
    return {
        "back": "Going back.",
        "home": "Going to the home screen.",
        "scroll": "Scrolling down.",
        "done": "The task is complete.",
    }.get(step.op, "Next step.")


def element_action(kind: str, element: Element, size: tuple[int, int], **kwargs: object) -> Action:
    """An action at the centre of ``element``'s label text, with the element's box (relative coordinates)."""
    x0, y0, x1, y1 = element.box_px()
    w, h = size
    box = (x0 / w, y0 / h, min(1.0, x1 / w), min(1.0, y1 / h))
    tx0, ty0, tx1, ty1 = element.text_box_px()
    cx, cy = (tx0 + tx1 - 1) / 2, (ty0 + ty1 - 1) / 2
    return Action(kind, x=cx / (w - 1), y=cy / (h - 1), box=box, **kwargs)  # type: ignore[arg-type]


def expert_action(world: GuiWorld, step: PlanStep, value: str, person: str | None = None) -> Action:
    """The correct action for ``step`` on the world's current screen (``person``: a remembered label)."""
    if step.op in ("open_app", "back", "home"):
        from causalcache_lab.world.vocab import encode

        return encode(world.spec.vocab, step.op, step.app)
    if step.op in ("click", "type"):
        screen = world.screen()
        label = step.label if step.label is not None else person
        kinds = ("field",) if step.op == "type" else ("item", "button", "toggle", "text", "icon")
        match = [e for e in screen.elements if e.action is not None and e.kind in kinds and e.label == label]
        if not match:
            raise CausalCacheError(f"expert: no element {label!r} on screen {screen.app}/{screen.title}")
        if step.op == "click":
            return element_action("click", match[0], world.size, target=label)
        return element_action("type", match[0], world.size, text=step.text or value, target=step.label)
    if step.op == "done":
        return Action("done", status="success")
    if step.op == "scroll":
        return Action("scroll", direction="down")
    return Action(step.op)  # type: ignore[arg-type]


def run_expert(task: Task, archive: ScreenshotArchive | None = None) -> tuple[Trajectory | None, GuiWorld]:
    """Execute ``task``'s plan; returns the demonstration (None without an archive) and the final world."""
    world = GuiWorld(task, slips=False)  # the expert's world never drops an action
    shot = world.screenshot()
    before = archive.put(shot).sha256 if archive is not None else None
    steps: list[Step] = []
    for i, step in enumerate(task.steps, 1):
        action = expert_action(world, step, task.value, task.target.get("contact"))
        response = respond(thought_for(step), action, world.size)
        shot, info = world.step(action)
        if archive is not None:
            after = archive.put(shot).sha256
            meta = {
                "plan_step": i,
                "evidence": i == task.evidence_step,
                "need": i == task.need_step,
                "evidence_visible": bool(info.evidence),
            }
            steps.append(Step(action, response, before, after, app=info.app, metadata=meta))  # type: ignore[arg-type]
            before = after
    if archive is None:
        return None, world
    traj = Trajectory(
        trajectory_id=task.task_id,
        goal=task.goal,
        platform=task.platform,
        screen_size=world.size,
        steps=tuple(steps),
        success=task.check(world.state()),
        metadata={
            "split": task.split,
            "task_id": task.task_id,
            "family": task.family,
            "template": task.family,
            "evidence_step": task.evidence_step,
            "need_step": task.need_step,
            "evidence_age": task.evidence_age,
            "value_kind": task.value_kind,
            "source": "synthetic-expert",
        },
    )
    return traj, world


def generate_demonstrations(tasks: Iterable[Task], archive: ScreenshotArchive) -> list[Trajectory]:
    """Successful expert trajectories for ``tasks`` (screenshots stored in ``archive``)."""
    out: list[Trajectory] = []
    for task in tasks:
        traj, _ = run_expert(task, archive)
        assert traj is not None
        if not traj.success:
            raise CausalCacheError(
                f"expert failed task {task.task_id}; the world or the task is inconsistent"
            )
        out.append(traj)
    return out
