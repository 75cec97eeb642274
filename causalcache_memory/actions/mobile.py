"""Parse JSON actions (mobile, and Qwen/GUI-Owl style tool calls) into one :class:`Action`.

Accepted shapes: ``{"action": "click", "coordinate": [x, y]}`` (Qwen ``mobile_use``/``computer_use``),
``{"action_type": "click", "x": x, "y": y}`` (AndroidWorld style), and either wrapped in a tool call
``{"name": "mobile_use", "arguments": {...}}`` (``arguments`` may be a JSON string), and
:meth:`Action.to_dict` output (``{"type": "click", "x": 0.5, "y": 0.5}``, relative). Points may be a list,
``{"x": .., "y": ..}``, a string ``"[x, y]"`` or top-level ``x``/``y``; end points of swipes and drags
come from ``coordinate2``/``end``/``end_coordinate``. Coordinate systems are resolved as in :mod:`.coords`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, Literal, overload

from causalcache_memory.actions.coords import CoordMode, RawAction, build_action, number
from causalcache_memory.actions.model import ACTION_TYPES, TRIPLE_CLICKS, Action
from causalcache_memory.errors import ActionParseError

__all__ = ["ACTION_SYNONYMS", "parse_mobile_json", "read_mobile_json", "unwrap"]

#: accepted JSON action names -> canonical handler name
ACTION_SYNONYMS: dict[str, str] = {
    **dict.fromkeys(["click", "tap", "left_click", "leftclick"], "click"),
    **dict.fromkeys(["double_click", "double_tap", "doubleclick"], "double_click"),
    **dict.fromkeys(["triple_click", "tripleclick"], "triple_click"),
    **dict.fromkeys(["right_click", "rightclick"], "right_click"),
    **dict.fromkeys(["long_press", "long_click", "longpress", "long_tap"], "long_press"),
    **dict.fromkeys(["move", "mouse_move", "hover", "move_to"], "move"),
    **dict.fromkeys(["drag", "left_click_drag", "drag_and_drop"], "drag"),
    "swipe": "swipe",
    **dict.fromkeys(["scroll", "vscroll"], "scroll"),
    "hscroll": "hscroll",
    **dict.fromkeys(["type", "input_text", "input", "write", "typing"], "type"),
    "hotkey": "hotkey",
    **dict.fromkeys(["key", "press", "press_key", "keyboard_enter"], "key"),
    **dict.fromkeys(["open_app", "open", "launch", "launch_app"], "open_app"),
    **dict.fromkeys(["navigate_back", "back", "press_back"], "back"),
    **dict.fromkeys(["navigate_home", "home", "press_home"], "home"),
    "system_button": "system_button",
    **dict.fromkeys(["wait", "sleep"], "wait"),
    **dict.fromkeys(["terminate", "status", "done", "finish", "finished", "stop"], "done"),
    "answer": "answer",
}
_START_KEYS = (
    "coordinate",
    "coordinates",
    "coordinate1",
    "start",
    "start_coordinate",
    "start_point",
    "point",
    "position",
)
_END_KEYS = ("coordinate2", "end", "end_coordinate", "end_point")
_FAILURE = {"failure", "fail", "failed", "infeasible", "impossible", "false"}


def _point(value: Any, key: str) -> tuple[Any, Any]:
    if isinstance(value, str):
        parts = [p for p in re.split(r"[\s,()\[\]]+", value) if p]
        value = parts
    if isinstance(value, dict):
        value = [value.get("x"), value.get("y")]
    if not isinstance(value, (list, tuple)) or len(value) != 2 or any(v is None for v in value):
        raise ActionParseError(f"{key}={value!r} must be a point [x, y]")
    number(value[0], f"{key}[0]")
    number(value[1], f"{key}[1]")
    return value[0], value[1]


@overload
def _start(data: dict[str, Any], required: Literal[True], kind: str) -> tuple[Any, Any]: ...
@overload
def _start(data: dict[str, Any], required: bool, kind: str) -> tuple[Any, Any] | None: ...
def _start(data: dict[str, Any], required: bool, kind: str) -> tuple[Any, Any] | None:
    for key in _START_KEYS:
        if data.get(key) is not None:
            return _point(data[key], key)
    if "x" in data or "y" in data:
        return _point([data.get("x"), data.get("y")], "x/y")
    if required:
        raise ActionParseError(f'action {kind!r} needs a point; add "coordinate": [x, y]')
    return None


def _end(data: dict[str, Any]) -> tuple[Any, Any] | None:
    for key in _END_KEYS:
        if data.get(key) is not None:
            return _point(data[key], key)
    if "x2" in data or "y2" in data:
        return _point([data.get("x2"), data.get("y2")], "x2/y2")
    return None


def _text(data: dict[str, Any], kind: str, *keys: str) -> str:
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value:
            return value
    raise ActionParseError(f"action {kind!r} needs non-empty text in one of {list(keys)}; got {data!r}")


def _seconds(data: dict[str, Any]) -> float | None:
    for key in ("time", "duration", "seconds", "amount"):
        if data.get(key) is not None:
            return float(number(data[key], key)[0])
    return None


def _direction(data: dict[str, Any], kind: str) -> str | None:
    value = data.get("direction")
    if value is None:
        return None
    value = str(value).strip().lower()
    if value not in ("up", "down", "left", "right"):
        raise ActionParseError(f"{kind} direction={value!r} must be up, down, left or right")
    return value


def _pointer(kind: str) -> Callable[[dict[str, Any]], RawAction]:
    def read(data: dict[str, Any]) -> RawAction:
        amount = _seconds(data) if kind == "long_press" else None
        return RawAction(kind, [_start(data, True, kind)], {"amount": amount} if amount is not None else {})

    return read


def _drag(data: dict[str, Any]) -> RawAction:
    start, end = _start(data, True, "drag"), _end(data)
    if end is None:
        raise ActionParseError("action 'drag' needs an end point; add \"coordinate2\": [x, y]")
    return RawAction("drag", [start, end])


def _swipe(data: dict[str, Any]) -> RawAction:
    start, end, direction = _start(data, False, "swipe"), _end(data), _direction(data, "swipe")
    if end is not None and start is None:
        raise ActionParseError('swipe has an end point but no start; add "coordinate": [x, y]')
    if end is None and direction is None:
        raise ActionParseError('swipe needs an end point ("coordinate2") or a "direction"')
    raw = RawAction("swipe", [p for p in (start, end) if p is not None], {"direction": direction})
    if start is None:
        raw.default_point = (0.5, 0.5)
    return raw


def _scroll(data: dict[str, Any], horizontal: bool = False) -> RawAction:
    direction = _direction(data, "scroll")
    amount = data.get("pixels", data.get("amount"))
    amount = None if amount is None else float(number(amount, "amount")[0])
    if direction is None:
        if amount is None or amount == 0:
            raise ActionParseError('scroll needs a "direction" (up/down/left/right) or signed "pixels"')
        direction = ("right" if amount > 0 else "left") if horizontal else ("up" if amount > 0 else "down")
    anchor = _start(data, False, "scroll")
    return RawAction("scroll", [anchor] if anchor else [], {"direction": direction, "amount": amount})


def _keys(data: dict[str, Any], kind: str) -> tuple[str, ...]:
    if data.get("action", data.get("action_type")) == "keyboard_enter":
        return ("enter",)
    value = data.get("keys", data.get("key", data.get("text", data.get("button"))))
    if isinstance(value, str) and value:
        value = value.split("+") if "+" in value and len(value) > 1 else [value]
    if not isinstance(value, (list, tuple)) or not value or not all(isinstance(k, str) and k for k in value):
        raise ActionParseError(f'action {kind!r} needs "keys": a list of key names; got {value!r}')
    return tuple(k if k in (" ", "\n") else k.strip().lower() for k in value)


def _system_button(data: dict[str, Any]) -> RawAction:
    button = str(data.get("button", data.get("text", ""))).strip().lower()
    if button == "back":
        return RawAction("back")
    if button == "home":
        return RawAction("home")
    if button in ("enter", "menu", "recent", "volume_up", "volume_down", "power"):
        return RawAction("key", fields={"keys": (button,)})
    raise ActionParseError(f"system_button button={button!r} must be Back, Home, Menu or Enter")


def _done(data: dict[str, Any]) -> RawAction:
    status = str(data.get("status", data.get("goal_status", data.get("result", "success")))).strip().lower()
    return RawAction("done", fields={"status": "failure" if status in _FAILURE else "success"})


_HANDLERS: dict[str, Callable[[dict[str, Any]], RawAction]] = {
    **{k: _pointer(k) for k in ("click", "double_click", "right_click", "long_press", "move")},
    "triple_click": lambda d: RawAction(
        "click", [_start(d, True, "triple_click")], {"amount": TRIPLE_CLICKS}
    ),
    "drag": _drag,
    "swipe": _swipe,
    "scroll": _scroll,
    "hscroll": lambda d: _scroll(d, horizontal=True),
    "type": lambda d: RawAction(
        "type",
        [p] if (p := _start(d, False, "type")) else [],
        {"text": _text(d, "type", "text", "content", "value")},
    ),
    "hotkey": lambda d: RawAction("hotkey", fields={"keys": _keys(d, "hotkey")}),
    "key": lambda d: RawAction("key", fields={"keys": _keys(d, "key")}),
    "open_app": lambda d: RawAction(
        "open_app", fields={"text": _text(d, "open_app", "app_name", "text", "app")}
    ),
    "back": lambda d: RawAction("back"),
    "home": lambda d: RawAction("home"),
    "system_button": _system_button,
    "wait": lambda d: RawAction("wait", fields={"amount": _seconds(d)}),
    "done": _done,
    "answer": lambda d: RawAction("answer", fields={"text": _text(d, "answer", "text", "answer", "content")}),
}


def _load(obj: str | dict[str, Any]) -> dict[str, Any]:
    if isinstance(obj, str):
        text = obj
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as err:
            raise ActionParseError(
                f"bad JSON action ({err.msg} at line {err.lineno} column {err.colno}): {text[:120]!r}"
            ) from None
    if not isinstance(obj, dict):
        raise ActionParseError(
            f'a JSON action must be an object like {{"action": "click", ...}}; got {obj!r}'
        )
    return obj


def unwrap(data: dict[str, Any]) -> dict[str, Any]:
    """Strip tool-call wrappers: ``{"name", "arguments"}`` and OpenAI's ``{"function": {...}}``."""
    if isinstance(data.get("function"), dict):
        data = data["function"]
    if "arguments" in data and "action" not in data and "action_type" not in data:
        data = _load(data["arguments"])
    if isinstance(data.get("action"), dict):
        data = data["action"]
    return data


def read_mobile_json(obj: str | dict[str, Any]) -> RawAction:
    """One JSON action as a :class:`RawAction` (coordinates as written, not yet converted)."""
    data = unwrap(_load(obj))
    if "action" not in data and "action_type" not in data and data.get("type") in ACTION_TYPES:
        return _own(data)
    name = data.get("action", data.get("action_type"))
    if not isinstance(name, str) or not name.strip():
        raise ActionParseError(f'JSON action has no "action" (or "action_type") name: {data!r}')
    canonical = ACTION_SYNONYMS.get(name.strip().lower().replace("-", "_").replace(" ", "_"))
    if canonical is None:
        raise ActionParseError(f"unknown action {name!r}; accepted: {', '.join(sorted(ACTION_SYNONYMS))}")
    return _HANDLERS[canonical](data)


def _own(data: dict[str, Any]) -> RawAction:
    """This library's own serialization (:meth:`Action.to_dict`, relative coordinates)."""
    action = Action.from_dict(data)
    fields = {k: v for k, v in action.to_dict().items() if k not in ("type", "x", "y", "x2", "y2")}
    if "keys" in fields:
        fields["keys"] = tuple(fields["keys"])
    if "box" in fields:
        fields["box"] = tuple(fields["box"])
    points = [(action.x, action.y)] if action.x is not None else []
    if action.x2 is not None:
        points.append((action.x2, action.y2))
    return RawAction(action.type, points, fields, system="relative")


def parse_mobile_json(
    obj: str | dict[str, Any], *, screen_size: tuple[int, int] | None = None, coords: CoordMode = "auto"
) -> Action:
    """Parse one JSON action (a string or an already decoded dict) into an :class:`Action`."""
    return build_action(read_mobile_json(obj), screen_size=screen_size, coords=coords)
