"""JSON actions: Qwen mobile_use / computer_use, AndroidWorld style, tool-call wrappers, malformed input."""

from __future__ import annotations

import pytest

from causalcache_memory.actions import Action, parse_mobile_json
from causalcache_memory.errors import ActionParseError

PHONE = (1001, 2001)  # pixel p maps to p / 1000 (x) and p / 2000 (y)


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        ({"action": "click", "coordinate": [500, 1000]}, Action("click", x=0.5, y=0.5)),
        ({"action": "tap", "coordinate": "[500, 1000]"}, Action("click", x=0.5, y=0.5)),
        ({"action": "left_click", "coordinate": {"x": 500, "y": 1000}}, Action("click", x=0.5, y=0.5)),
        ({"action_type": "click", "x": 500, "y": 1000}, Action("click", x=0.5, y=0.5)),
        ({"action_type": "click", "x": "500", "y": "1000"}, Action("click", x=0.5, y=0.5)),
        ({"action": "double_click", "coordinate": [250, 500]}, Action("double_click", x=0.25, y=0.25)),
        ({"action": "right_click", "coordinate": [250, 500]}, Action("right_click", x=0.25, y=0.25)),
        ({"action": "long_press", "coordinate": [250, 500], "time": 2},
         Action("long_press", x=0.25, y=0.25, amount=2.0)),
        ({"action": "mouse_move", "coordinate": [250, 500]}, Action("move", x=0.25, y=0.25)),
        ({"action": "drag", "coordinate": [250, 500], "coordinate2": [500, 1000]},
         Action("drag", x=0.25, y=0.25, x2=0.5, y2=0.5)),
        ({"action": "swipe", "coordinate": [500, 1500], "coordinate2": [500, 500]},
         Action("swipe", x=0.5, y=0.75, x2=0.5, y2=0.25, direction="up")),
        ({"action": "swipe", "coordinate": [500, 1000], "direction": "left"},
         Action("swipe", x=0.5, y=0.5, direction="left")),
        ({"action": "swipe", "direction": "Down"}, Action("swipe", x=0.5, y=0.5, direction="down")),
        ({"action_type": "scroll", "direction": "down"}, Action("scroll", direction="down")),
        ({"action": "scroll", "pixels": -300}, Action("scroll", direction="down", amount=-300.0)),
        ({"action": "hscroll", "pixels": 200}, Action("scroll", direction="right", amount=200.0)),
        ({"action": "type", "text": "hello"}, Action("type", text="hello")),
        ({"action_type": "input_text", "text": "hi", "x": 500, "y": 1000},
         Action("type", x=0.5, y=0.5, text="hi")),
        ({"action": "key", "text": "Enter"}, Action("key", keys=("enter",))),
        ({"action": "key", "keys": ["ctrl", "c"]}, Action("key", keys=("ctrl", "c"))),
        ({"action": "hotkey", "keys": "ctrl+shift+t"}, Action("hotkey", keys=("ctrl", "shift", "t"))),
        ({"action_type": "keyboard_enter"}, Action("key", keys=("enter",))),
        ({"action": "open", "text": "Settings"}, Action("open_app", text="Settings")),
        ({"action_type": "open_app", "app_name": "Chrome"}, Action("open_app", text="Chrome")),
        ({"action_type": "navigate_back"}, Action("back")),
        ({"action_type": "navigate_home"}, Action("home")),
        ({"action": "system_button", "button": "Back"}, Action("back")),
        ({"action": "system_button", "button": "Home"}, Action("home")),
        ({"action": "system_button", "button": "Enter"}, Action("key", keys=("enter",))),
        ({"action": "wait", "time": 2}, Action("wait", amount=2.0)),
        ({"action_type": "wait"}, Action("wait")),
        ({"action": "terminate", "status": "success"}, Action("done", status="success")),
        ({"action": "terminate", "status": "failure"}, Action("done", status="failure")),
        ({"action_type": "status", "goal_status": "infeasible"}, Action("done", status="failure")),
        ({"action_type": "status", "goal_status": "complete"}, Action("done", status="success")),
        ({"action": "answer", "text": "42 items"}, Action("answer", text="42 items")),
        ({"name": "mobile_use", "arguments": {"action": "click", "coordinate": [500, 1000]}},
         Action("click", x=0.5, y=0.5)),
        ({"name": "mobile_use", "arguments": '{"action": "click", "coordinate": [500, 1000]}'},
         Action("click", x=0.5, y=0.5)),
        ({"function": {"name": "computer_use", "arguments": {"action": "left_click", "coordinate": [500, 1000]}}},
         Action("click", x=0.5, y=0.5)),
        ('{"action": "click", "coordinate": [500, 1000]}', Action("click", x=0.5, y=0.5)),
        (Action("drag", x=0.1, y=0.2, x2=0.3, y2=0.4).to_dict(), Action("drag", x=0.1, y=0.2, x2=0.3, y2=0.4)),
    ],
)  # fmt: skip
def test_parse_json_actions(obj, expected: Action) -> None:
    assert parse_mobile_json(obj, screen_size=PHONE) == expected


@pytest.mark.parametrize(
    ("obj", "screen", "coords", "xy"),
    [
        ({"action": "click", "coordinate": [0.5, 0.25]}, None, "auto", (0.5, 0.25)),
        ({"action": "click", "coordinate": [500, 250]}, None, "auto", (0.5, 0.25)),
        ({"action": "click", "coordinate": [500, 250]}, PHONE, "auto", (0.5, 0.125)),
        ({"action": "click", "coordinate": [500, 250]}, PHONE, "thousand", (0.5, 0.25)),
        ({"action": "click", "coordinate": ["0.5", "0.25"]}, None, "auto", (0.5, 0.25)),
    ],
)
def test_json_coordinate_systems(obj, screen, coords: str, xy) -> None:
    action = parse_mobile_json(obj, screen_size=screen, coords=coords)
    assert (action.x, action.y) == pytest.approx(xy)


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        ("{not json", "bad JSON"),
        ("[1, 2]", "must be an object"),
        ({"coordinate": [1, 2]}, 'no "action"'),
        ({"action": "teleport"}, "unknown action 'teleport'"),
        ({"action": "click"}, "needs a point"),
        ({"action": "click", "coordinate": [1, 2, 3]}, "must be a point"),
        ({"action": "click", "coordinate": ["a", "b"]}, "not a number"),
        ({"action": "click", "coordinate": [None, 5]}, "must be a point"),
        ({"action": "click", "coordinate": [5000, 5]}, "5000"),
        ({"action": "drag", "coordinate": [1, 2]}, "end point"),
        ({"action": "swipe"}, "direction"),
        ({"action": "swipe", "coordinate": [1, 2], "direction": "sideways"}, "sideways"),
        ({"action": "scroll"}, "direction"),
        ({"action": "type"}, "non-empty text"),
        ({"action": "open", "text": ""}, "non-empty text"),
        ({"action": "key"}, "keys"),
        ({"action": "system_button", "button": "Teleport"}, "system_button"),
        ({"name": "mobile_use", "arguments": "{oops"}, "bad JSON"),
    ],
)
def test_malformed_json_raises(obj, message: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_mobile_json(obj)
    assert message in str(info.value)
