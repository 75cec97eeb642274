"""Deterministic one-line event summaries written from structured actions.

The default summarizer writes what the agent *did*, never what it saw: evidence that was only shown on a
screen does not appear in a summary, so recovering it needs the archived pixels (paper, Problem
Formulation). Example: ``7. click (412, 88) "Orders" [Shop]``.

A summarizer is any callable ``(index, action, app, screen_size, instruction) -> str``; pass
:func:`instruction_summarizer` to use a dataset's own low-level instruction when it has one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Protocol

from causalcache_memory.actions.model import Action

__all__ = [
    "Summarizer",
    "action_text",
    "default_summarizer",
    "instruction_summarizer",
    "summarize_action",
    "unparsed_summary",
]

_MAX_TEXT = 40
_CLIP = 60


class Summarizer(Protocol):
    def __call__(
        self,
        index: int,
        action: Action,
        *,
        app: str | None,
        screen_size: tuple[int, int] | None,
        instruction: str | None,
    ) -> str: ...


def _point(action: Action, x: float | None, y: float | None, screen_size: tuple[int, int] | None) -> str:
    if x is None or y is None:
        return ""
    if screen_size is None:
        return f"({x:.3f}, {y:.3f})"
    w, h = screen_size
    return f"({round(x * (w - 1))}, {round(y * (h - 1))})"


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _MAX_TEXT else text[: _MAX_TEXT - 1] + "…"


def summarize_action(action: Action, screen_size: tuple[int, int] | None = None) -> str:
    """The action part of a summary, e.g. ``click (412, 88) "Orders"`` or ``scroll (640, 400) down 3``."""
    parts: list[str] = [action.type]
    if action.type in ("drag", "swipe") and action.x2 is not None and action.y2 is not None:
        parts.append(
            _point(action, action.x, action.y, screen_size)
            + " -> "
            + _point(action, action.x2, action.y2, screen_size)
        )
    else:
        point = _point(action, action.x, action.y, screen_size)
        if point:
            parts.append(point)
    if action.direction:
        parts.append(action.direction)
    if action.type == "scroll" and action.amount:
        parts.append(f"{abs(action.amount):g}")  # clicks (pixels on mobile); the sign is the direction
    if action.keys:
        parts.append("+".join(action.keys))
    if action.text is not None:
        parts.append('"' + _clip(action.text) + '"')
    elif action.target:
        parts.append('"' + _clip(action.target) + '"')
    if action.status:
        parts.append(action.status)
    return " ".join(parts)


def action_text(action: Action | Mapping[str, Any] | None, screen_size: tuple[int, int] | None) -> str | None:
    """A recorded action (an :class:`Action` or its dict) written as the summaries write it: pixels on
    ``screen_size`` (the screen the action acted on), e.g. ``click (1650, 1040)``; None for no action.
    A dict that is not a valid action is shown as JSON."""
    if action is None:
        return None
    if isinstance(action, Mapping):
        try:
            action = Action.from_dict(dict(action))
        except (TypeError, ValueError, KeyError):
            return json.dumps(action, sort_keys=True, default=str)
    return summarize_action(action, screen_size)


def default_summarizer(
    index: int,
    action: Action,
    *,
    app: str | None = None,
    screen_size: tuple[int, int] | None = None,
    instruction: str | None = None,
) -> str:
    """``{index}. {action} [{App}]`` — deterministic, one line, action-only."""
    line = f"{index}. {summarize_action(action, screen_size)}"
    if app:
        line += f" [{app}]"
    return line


def instruction_summarizer(
    index: int,
    action: Action,
    *,
    app: str | None = None,
    screen_size: tuple[int, int] | None = None,
    instruction: str | None = None,
) -> str:
    """Use the step's own low-level instruction when the data has one, else the default."""
    if instruction:
        line = f"{index}. {' '.join(instruction.split())}"
        return line + (f" [{app}]" if app else "")
    return default_summarizer(index, action, app=app, screen_size=screen_size)


def unparsed_summary(index: int, response: str, app: str | None = None) -> str:
    """The one-line summary of an executed step whose reply held no parsable action (60 characters)."""
    text = " ".join(str(response).split())
    text = text if len(text) <= _CLIP else text[: _CLIP - 1] + "…"
    where = f" [{app}]" if app else ""
    return f"{index}. (reply not parsed) {text!r}{where}" if text else f"{index}. (reply not parsed){where}"
