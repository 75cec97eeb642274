"""Deterministic synthetic agent steps for the overhead benchmarks (actions, responses, a no-cost policy)."""

from __future__ import annotations

import random
import time
from collections.abc import Sequence

from causalcache_memory.actions.model import Action
from causalcache_memory.policy import Generation

__all__ = ["GOAL", "InstantPolicy", "step_action", "step_response"]

GOAL = "Find the invoice total of the March order in the shop app and write it into a new note"
_APPS = ("Shop", "Notes", "Messages", "Calendar", "Files", "Browser")
_LABELS = ("Orders", "Invoice", "Search", "New note", "Save", "Back", "Settings", "Inbox", "Details")


def step_action(index: int) -> Action:
    """A varied, valid action for step ``index`` (clicks, typing, scrolling, app switches)."""
    rng = random.Random(index)
    kind = index % 6
    if kind == 3:
        return Action("type", x=rng.random(), y=rng.random(), text=f"order {rng.randrange(1000)} total")
    if kind == 4:
        return Action("scroll", x=0.5, y=0.5, direction=rng.choice(("up", "down")), amount=-3)
    if kind == 5:
        return Action("open_app", text=rng.choice(_APPS))
    return Action("click", x=rng.random(), y=rng.random(), target=rng.choice(_LABELS))


def step_response(index: int, action: Action) -> str:
    """A verbatim-looking policy response ``r_j`` (a short thought plus the action)."""
    rng = random.Random(-index)
    thought = " ".join(rng.choice(_LABELS).lower() for _ in range(12))
    return f"Thought: the screen shows {thought}; next I act on it.\nAction: {action.to_dict()}"


class InstantPolicy:
    """A :class:`~causalcache_memory.policy.Policy` that answers instantly, so timings exclude model calls.

    ``generate`` returns step ``self.step``'s action and keeps the prompt it was given (``last_prompt``)
    so a benchmark can time building the request from it separately. With ``delay_s > 0`` every call
    sleeps that long first: a simulated model call (no CPU, the GIL released) that background work such
    as a thumbnail prefetch can overlap.
    """

    name = "instant"

    def __init__(self) -> None:
        self.calls = 0
        self.step = 1
        self.last_prompt: object | None = None
        self.delay_s = 0.0

    def generate(self, prompt: object) -> Generation:
        if self.delay_s > 0.0:
            time.sleep(self.delay_s)
        self.calls += 1
        self.last_prompt = prompt
        action = step_action(self.step)
        return Generation(step_response(self.step, action), action)

    def score(self, prompts: Sequence[object], targets: Sequence[str]) -> list[float]:
        return [0.0] * len(prompts)
