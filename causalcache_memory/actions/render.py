"""Render an :class:`Action` back to PyAutoGUI code or a JSON action, and compose full responses.

JSON uses the vocabulary of Qwen's ``mobile_use`` tool where it has the action (``click``,
``long_press``, ``swipe``, ``type``, ``key``, ``open``, ``system_button``, ``wait``, ``terminate``,
``answer``) and the :class:`Action` type name otherwise (``double_click``, ``right_click``, ``move``,
``drag``, ``scroll``, ``hotkey``). PyAutoGUI covers desktop actions; mobile-only actions (``swipe``,
``open_app``, ``back``, ``home``) raise :class:`RenderError` there. Relative coordinates are written as
floats and pixel/grid coordinates as integers, so ``coords="auto"`` parsing reads them back in the
same system (give the same ``screen_size`` when rendering pixels).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from causalcache_memory.actions.coords import CoordSystem, from_relative
from causalcache_memory.actions.model import TRIPLE_CLICKS, Action
from causalcache_memory.errors import RenderError

__all__ = ["compose_response", "render_action"]

_DEFAULT_SCROLL = 5.0


def _pt(action: Action, second: bool, coords: CoordSystem, screen_size: tuple[int, int] | None) -> tuple:
    x, y = (action.x2, action.y2) if second else (action.x, action.y)
    assert x is not None and y is not None
    try:
        return from_relative(x, y, coords, screen_size)
    except ValueError as err:
        raise RenderError(f"cannot render {action.type} coordinates: {err}") from None


def _xy(point: tuple) -> str:
    return f"{point[0]!r}, {point[1]!r}"


def _json(action: Action, coords: CoordSystem, screen_size: tuple[int, int] | None) -> dict[str, Any]:
    names = {"open_app": "open", "done": "terminate", "move": "move"}
    out: dict[str, Any] = {"action": names.get(action.type, action.type)}
    if action.type == "click" and action.amount == TRIPLE_CLICKS:
        return {"action": "triple_click", "coordinate": list(_pt(action, False, coords, screen_size))}
    if action.type in ("back", "home"):
        return {"action": "system_button", "button": action.type.capitalize()}
    if action.x is not None and action.y is not None:
        out["coordinate"] = list(_pt(action, False, coords, screen_size))
    if action.x2 is not None and action.y2 is not None:
        out["coordinate2"] = list(_pt(action, True, coords, screen_size))
    if action.text is not None:
        out["text"] = action.text
    if action.keys:
        out["keys"] = list(action.keys)
    if action.direction is not None:
        out["direction"] = action.direction
    if action.amount is not None:
        out["time" if action.type in ("wait", "long_press") else "amount"] = action.amount
    if action.type == "done":
        out["status"] = action.status or "success"
    return out


def _scroll_code(action: Action, coords: CoordSystem, screen_size: tuple[int, int] | None) -> str:
    direction = action.direction or ("up" if (action.amount or -1) > 0 else "down")
    clicks = abs(action.amount) if action.amount else _DEFAULT_SCROLL
    signed = clicks if direction in ("up", "right") else -clicks
    fn = "hscroll" if direction in ("left", "right") else "scroll"
    count = int(signed) if float(signed).is_integer() else signed
    anchor = f", {_xy(_pt(action, False, coords, screen_size))}" if action.x is not None else ""
    return f"pyautogui.{fn}({count!r}{anchor})"


def _code(action: Action, coords: CoordSystem, screen_size: tuple[int, int] | None) -> str:
    t = action.type
    point = (lambda: _xy(_pt(action, False, coords, screen_size))) if action.x is not None else None
    simple = {"click": "click", "double_click": "doubleClick", "right_click": "rightClick", "move": "moveTo"}
    if t == "click" and action.amount == TRIPLE_CLICKS:
        return f"pyautogui.tripleClick({point()})"  # type: ignore[misc]
    if t in simple:
        return f"pyautogui.{simple[t]}({point()})"  # type: ignore[misc]
    if t == "drag":
        end = _xy(_pt(action, True, coords, screen_size))
        return f"pyautogui.moveTo({point()})\npyautogui.dragTo({end}, button='left')"  # type: ignore[misc]
    if t == "long_press":
        return f"pyautogui.mouseDown({point()})\ntime.sleep({action.amount or 1.0!r})\npyautogui.mouseUp({point()})"  # type: ignore[misc]
    if t == "scroll":
        return _scroll_code(action, coords, screen_size)
    if t == "type":
        write = f"pyautogui.write({action.text!r})"
        return f"pyautogui.click({point()})\n{write}" if point else write
    if t == "hotkey":
        return f"pyautogui.hotkey({', '.join(repr(k) for k in action.keys)})"
    if t == "key":
        keys = action.keys[0] if len(action.keys) == 1 else list(action.keys)
        return f"pyautogui.press({keys!r})"
    if t == "wait":
        return "WAIT" if action.amount is None else f"time.sleep({action.amount!r})"
    if t == "done":
        return "FAIL" if action.status == "failure" else "DONE"
    if t == "answer":
        return f"computer.terminate(status='success', answer={action.text!r})"
    raise RenderError(
        f"action type {t!r} has no PyAutoGUI form (it is a mobile action); render it with fmt='json'"
    )


def render_action(
    action: Action,
    *,
    fmt: Literal["pyautogui", "json"],
    screen_size: tuple[int, int] | None = None,
    coords: CoordSystem = "absolute",
) -> str:
    """The action as PyAutoGUI code or a one-line JSON object, coordinates written in ``coords``.

    Raises:
        RenderError: ``coords="absolute"`` without ``screen_size`` for an action with coordinates, an
            unknown ``fmt``/``coords``, or a mobile-only action rendered as PyAutoGUI.
    """
    if coords not in ("relative", "absolute", "thousand"):
        raise RenderError(f"coords={coords!r} must be 'relative', 'absolute' or 'thousand'")
    if fmt == "json":
        return json.dumps(_json(action, coords, screen_size), ensure_ascii=False)
    if fmt == "pyautogui":
        return _code(action, coords, screen_size)
    raise RenderError(f"fmt={fmt!r} must be 'pyautogui' or 'json'")


def compose_response(
    thought: str,
    action: Action,
    *,
    fmt: Literal["pyautogui", "json"] = "json",
    screen_size: tuple[int, int] | None = None,
    coords: CoordSystem = "absolute",
) -> str:
    """``"Thought: <thought>\\nAction: <rendered action>"``; :func:`parse_action` reads it back."""
    return f"Thought: {thought.strip()}\nAction: {render_action(action, fmt=fmt, screen_size=screen_size, coords=coords)}"
