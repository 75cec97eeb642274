"""Rendering and render -> parse round trips for every action type, both formats, every coordinate system."""

from __future__ import annotations

import json

import pytest

from causalcache_memory.actions import (
    ACTION_TYPES,
    Action,
    actions_equivalent,
    compose_response,
    parse_action,
    render_action,
)
from causalcache_memory.errors import RenderError

SCREEN = (1921, 1081)

ACTIONS = [
    Action("click", x=0.25, y=0.75),
    Action("double_click", x=0.25, y=0.75),
    Action("right_click", x=0.25, y=0.75),
    Action("long_press", x=0.25, y=0.75, amount=2.0),
    Action("move", x=0.25, y=0.75),
    Action("drag", x=0.25, y=0.75, x2=0.5, y2=0.5),
    Action("swipe", x=0.5, y=0.75, x2=0.5, y2=0.25, direction="up"),
    Action("scroll", direction="down", amount=-3.0),
    Action("scroll", x=0.25, y=0.75, direction="left", amount=-2.0),
    Action("type", text="hello 'world' \"x\""),
    Action("type", x=0.25, y=0.75, text="line\n"),
    Action("hotkey", keys=("ctrl", "shift", "t")),
    Action("key", keys=("enter",)),
    Action("open_app", text="Settings"),
    Action("back"),
    Action("home"),
    Action("wait", amount=2.0),
    Action("wait"),
    Action("done", status="success"),
    Action("done", status="failure"),
    Action("answer", text="It costs $5"),
]
MOBILE_ONLY = {"swipe", "open_app", "back", "home"}
SYSTEMS = [("relative", None), ("absolute", SCREEN), ("thousand", None)]


def test_every_action_type_is_covered() -> None:
    assert {a.type for a in ACTIONS} == set(ACTION_TYPES)


@pytest.mark.parametrize(("coords", "screen"), SYSTEMS)
@pytest.mark.parametrize("fmt", ["json", "pyautogui"])
@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.type)
def test_render_parse_round_trip(action: Action, fmt: str, coords: str, screen) -> None:
    if fmt == "pyautogui" and action.type in MOBILE_ONLY:
        with pytest.raises(RenderError, match="fmt='json'"):
            render_action(action, fmt=fmt, screen_size=screen, coords=coords)
        return
    text = render_action(action, fmt=fmt, screen_size=screen, coords=coords)
    # "auto" must find the same coordinate system the renderer wrote
    assert parse_action(text, screen_size=screen) == action
    assert parse_action(text, screen_size=screen, coords=coords) == action


@pytest.mark.parametrize("fmt", ["json", "pyautogui"])
@pytest.mark.parametrize("action", [a for a in ACTIONS if a.type not in MOBILE_ONLY], ids=lambda a: a.type)
def test_compose_response_round_trip(action: Action, fmt: str) -> None:
    thought = 'The {"action": "back"} text and pyautogui.click(1, 2) are only in the thought.\nDONE'
    response = compose_response(thought, action, fmt=fmt, screen_size=SCREEN)
    assert response.startswith("Thought: The ")
    assert "\nAction: " in response
    parsed = parse_action(response, screen_size=SCREEN)
    assert parsed == action
    assert actions_equivalent(action, parsed)


def test_off_grid_coordinates_round_trip_within_tolerance() -> None:
    action = Action("click", x=0.123456, y=0.654321)
    for coords, screen in SYSTEMS:
        parsed = parse_action(
            render_action(action, fmt="json", screen_size=screen, coords=coords), screen_size=screen
        )
        assert parsed.x == pytest.approx(action.x, abs=1e-3)
        assert actions_equivalent(action, parsed)
    pixels = render_action(action, fmt="pyautogui", screen_size=(1280, 800))
    assert parse_action(pixels, screen_size=(1280, 800)).pixel(1280, 800) == action.pixel(1280, 800)


@pytest.mark.parametrize(
    ("action", "fmt", "coords", "expected"),
    [
        (Action("click", x=0.5, y=0.25), "pyautogui", "absolute", "pyautogui.click(960, 270)"),
        (Action("click", x=0.5, y=0.25), "pyautogui", "relative", "pyautogui.click(0.5, 0.25)"),
        (Action("click", x=0.5, y=0.25), "pyautogui", "thousand", "pyautogui.click(500, 250)"),
        (Action("click", x=0.5, y=0.25), "json", "absolute", '{"action": "click", "coordinate": [960, 270]}'),
        (Action("back"), "json", "absolute", '{"action": "system_button", "button": "Back"}'),
        (
            Action("done", status="failure"),
            "json",
            "absolute",
            '{"action": "terminate", "status": "failure"}',
        ),
        (Action("hotkey", keys=("ctrl", "c")), "pyautogui", "absolute", "pyautogui.hotkey('ctrl', 'c')"),
        (Action("scroll", direction="up"), "pyautogui", "absolute", "pyautogui.scroll(5)"),
    ],
)
def test_rendered_text(action: Action, fmt: str, coords: str, expected: str) -> None:
    assert render_action(action, fmt=fmt, screen_size=SCREEN, coords=coords) == expected


def test_json_rendering_is_valid_json() -> None:
    for action in ACTIONS:
        assert isinstance(json.loads(render_action(action, fmt="json", screen_size=SCREEN)), dict)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"fmt": "json"}, "needs screen_size"),
        ({"fmt": "pyautogui"}, "needs screen_size"),
        ({"fmt": "yaml", "screen_size": SCREEN}, "fmt='yaml'"),
        ({"fmt": "json", "coords": "pixels"}, "coords='pixels'"),
    ],
)
def test_render_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(RenderError) as info:
        render_action(Action("click", x=0.5, y=0.5), **kwargs)
    assert message in str(info.value)


def test_actions_without_coordinates_need_no_screen() -> None:
    assert render_action(Action("type", text="hi"), fmt="json") == '{"action": "type", "text": "hi"}'
