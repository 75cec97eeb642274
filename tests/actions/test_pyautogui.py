"""PyAutoGUI parsing: every call, multi-line combinations, coordinate systems and malformed code."""

from __future__ import annotations

import pytest

from causalcache_memory.actions import Action, parse_pyautogui
from causalcache_memory.errors import ActionParseError

SCREEN = (1921, 1081)  # (w-1, h-1) = (1920, 1080): pixel p maps to p / 1920 exactly


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("pyautogui.click(960, 540)", Action("click", x=0.5, y=0.5)),
        ("pyautogui.click(x=960, y=540)", Action("click", x=0.5, y=0.5)),
        ("pyautogui.click((960, 540))", Action("click", x=0.5, y=0.5)),
        ("click(960, 540)", Action("click", x=0.5, y=0.5)),
        ("pyautogui.leftClick(960, 540)", Action("click", x=0.5, y=0.5)),
        ("pyautogui.click(960, 540, clicks=2)", Action("double_click", x=0.5, y=0.5)),
        ("pyautogui.click(960, 540, button='right')", Action("right_click", x=0.5, y=0.5)),
        ("pyautogui.doubleClick(480, 270)", Action("double_click", x=0.25, y=0.25)),
        ("pyautogui.rightClick(480, 270)", Action("right_click", x=0.25, y=0.25)),
        ("pyautogui.moveTo(480, 270)", Action("move", x=0.25, y=0.25)),
        ("pyautogui.moveTo(480, 270)\npyautogui.dragTo(960, 540, duration=0.5)",
         Action("drag", x=0.25, y=0.25, x2=0.5, y2=0.5)),
        ("pyautogui.mouseDown(480, 270)\npyautogui.moveTo(960, 540)\npyautogui.mouseUp()",
         Action("drag", x=0.25, y=0.25, x2=0.5, y2=0.5)),
        ("pyautogui.mouseDown(480, 270)\ntime.sleep(2)\npyautogui.mouseUp(480, 270)",
         Action("long_press", x=0.25, y=0.25, amount=2.0)),
        ("pyautogui.moveTo(480, 270)\npyautogui.click()", Action("click", x=0.25, y=0.25)),
        ("pyautogui.scroll(-5)", Action("scroll", direction="down", amount=-5.0)),
        ("pyautogui.scroll(3, x=480, y=270)", Action("scroll", x=0.25, y=0.25, direction="up", amount=3.0)),
        ("pyautogui.hscroll(4)", Action("scroll", direction="right", amount=4.0)),
        ("pyautogui.hscroll(-4)", Action("scroll", direction="left", amount=-4.0)),
        ("pyautogui.write('hello world')", Action("type", text="hello world")),
        ("pyautogui.typewrite('hi', interval=0.1)", Action("type", text="hi")),
        ("pyautogui.typewrite(['a', 'b'])", Action("key", keys=("a", "b"))),
        ("pyautogui.write('hi')\npyautogui.press('enter')", Action("type", text="hi\n")),
        ("pyautogui.click(480, 270)\npyautogui.write('hi')", Action("type", x=0.25, y=0.25, text="hi")),
        ("pyautogui.press('Enter')", Action("key", keys=("enter",))),
        ("pyautogui.press(['tab', 'tab'])", Action("key", keys=("tab", "tab"))),
        ("pyautogui.hotkey('ctrl', 'c')", Action("hotkey", keys=("ctrl", "c"))),
        ("pyautogui.keyDown('ctrl')\npyautogui.press('v')\npyautogui.keyUp('ctrl')",
         Action("hotkey", keys=("ctrl", "v"))),
        ("pyautogui.keyDown('ctrl')\npyautogui.keyDown('shift')\npyautogui.keyUp('shift')\npyautogui.keyUp('ctrl')",
         Action("hotkey", keys=("ctrl", "shift"))),
        ("time.sleep(3)", Action("wait", amount=3.0)),
        ("WAIT", Action("wait")),
        ("DONE", Action("done", status="success")),
        ("FAIL", Action("done", status="failure")),
        ("computer.terminate(status='failure')", Action("done", status="failure")),
        ("computer.terminate(status='success', answer='42')", Action("answer", text="42")),
        ("computer.wait()", Action("wait")),
        ("import pyautogui\npyautogui.click(960, 540)", Action("click", x=0.5, y=0.5)),
        ("    pyautogui.click(960, 540)\n    ", Action("click", x=0.5, y=0.5)),
    ],
)  # fmt: skip
def test_parse_pyautogui_calls(code: str, expected: Action) -> None:
    assert parse_pyautogui(code, screen_size=SCREEN) == expected


@pytest.mark.parametrize(
    ("code", "screen", "coords", "xy"),
    [
        ("pyautogui.click(0.5, 0.25)", None, "auto", (0.5, 0.25)),  # floats <= 1: relative
        ("pyautogui.click(1.0, 0)", SCREEN, "auto", (1.0, 0.0)),  # one float literal suffices
        ("pyautogui.click(960, 270)", SCREEN, "auto", (0.5, 0.25)),  # fits the screen: absolute
        ("pyautogui.click(500, 250)", None, "auto", (0.5, 0.25)),  # no screen, <= 1000: thousand
        ("pyautogui.click(1, 1)", None, "auto", (0.001, 0.001)),  # integers are never relative
        ("pyautogui.click(1, 1)", SCREEN, "auto", (1 / 1920, 1 / 1080)),
        ("pyautogui.click(2000, 500)", (4001, 1001), "auto", (0.5, 0.5)),
        ("pyautogui.click(900, 100)", (801, 601), "auto", (0.9, 0.1)),  # x beyond screen: thousand
        ("pyautogui.click(500, 250)", SCREEN, "thousand", (0.5, 0.25)),
        ("pyautogui.click(960, 540)", SCREEN, "absolute", (0.5, 0.5)),
        ("pyautogui.click(1, 1)", None, "relative", (1.0, 1.0)),
        ("pyautogui.click(1921, 1081)", SCREEN, "absolute", (1.0, 1.0)),  # 1 px overshoot: clamped
        ("pyautogui.click(1000.5, 0)", None, "thousand", (1.0, 0.0)),
    ],
)
def test_coordinate_systems(code: str, screen, coords: str, xy: tuple[float, float]) -> None:
    action = parse_pyautogui(code, screen_size=screen, coords=coords)
    assert action.x == pytest.approx(xy[0]) and action.y == pytest.approx(xy[1])


@pytest.mark.parametrize(
    ("code", "kwargs", "message"),
    [
        ("", {}, "empty"),
        ("   \n", {}, "empty"),
        ("pyautogui.quadrupleClick(1, 2)", {}, "unknown function pyautogui.quadrupleClick"),
        ("pyautogui.frobnicate()", {}, "unknown function"),
        ("os.system('rm -rf /')", {}, "os.system"),
        ("import os\nos.system('ls')", {}, "only pyautogui and time"),
        ("__import__('os').system('ls')", {}, "not allowed"),
        ("x = 5", {}, "not an action call"),
        ("pyautogui.click(", {}, "not valid Python"),
        ("pyautogui.click()", {}, "no coordinates"),
        ("pyautogui.click(100)", {}, "only one coordinate"),
        ("pyautogui.click(x=100)", {}, "missing coordinate"),
        ("pyautogui.click('a', 'b')", {}, "not a number"),
        ("pyautogui.click(x, y)", {}, "must be a literal"),
        ("pyautogui.click(True, 5)", {}, "not a number"),
        ("pyautogui.dragTo(10, 20)", {}, "start point"),
        ("pyautogui.mouseUp(10, 20)", {}, "without an earlier mouseDown"),
        ("pyautogui.click(10, 20, button='middle')", {}, "button='middle'"),
        ("pyautogui.click(10, 20)\npyautogui.click(30, 40)", {}, "2 actions"),
        ("pyautogui.write('')", {}, "non-empty text"),
        ("pyautogui.hotkey()", {}, "needs key names"),
        ("pyautogui.scroll('lots')", {}, "must be a number"),
        ("import pyautogui", {}, "no action"),
        ("pyautogui.click(5000, 20)", {}, "5000"),
        ("pyautogui.click(-5, 20)", {}, "-5"),
        ("pyautogui.click(1923, 10)", {"screen_size": SCREEN, "coords": "absolute"}, "x=1923"),
        ("pyautogui.click(10, 10)", {"coords": "absolute"}, "needs screen_size"),
        ("pyautogui.click(1.5, 0.5)", {"coords": "relative"}, "x=1.5"),
        ("pyautogui.click(10, 10)", {"coords": "pixels"}, "coords='pixels'"),
        ("pyautogui.click(10, 10)", {"screen_size": (0, 10)}, "screen_size"),
    ],
)
def test_malformed_code_raises(code: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ActionParseError, match=None) as info:
        parse_pyautogui(code, **kwargs)
    assert message in str(info.value)


def test_code_is_never_executed(tmp_path) -> None:
    marker = tmp_path / "pwned"
    with pytest.raises(ActionParseError):
        parse_pyautogui(f"open({str(marker)!r}, 'w').write('x')")
    assert not marker.exists()
