"""Full-action equivalence: types, arguments, radius and box tolerances at their boundaries."""

from __future__ import annotations

import pytest

from causalcache_memory.actions import Action, Tolerance, actions_equivalent, parse_action

A = Action
BOX = (0.4, 0.4, 0.6, 0.5)  # centre (0.5, 0.45), half sizes (0.1, 0.05); x1.2 -> (0.12, 0.06)


@pytest.mark.parametrize(
    ("ref", "got", "platform", "expected"),
    [
        # desktop radius 0.014 (relative Euclidean distance)
        (A("click", x=0.5, y=0.5), A("click", x=0.5, y=0.5), "desktop", True),
        (A("click", x=0.5, y=0.5), A("click", x=0.513, y=0.5), "desktop", True),
        (A("click", x=0.5, y=0.5), A("click", x=0.515, y=0.5), "desktop", False),
        (A("click", x=0.5, y=0.5), A("click", x=0.5095, y=0.5095), "desktop", True),  # 0.01344
        (A("click", x=0.5, y=0.5), A("click", x=0.5105, y=0.5105), "desktop", False),  # 0.01485
        # mobile radius 0.04
        (A("click", x=0.5, y=0.5), A("click", x=0.539, y=0.5), "mobile", True),
        (A("click", x=0.5, y=0.5), A("click", x=0.541, y=0.5), "mobile", False),
        (A("long_press", x=0.5, y=0.5), A("long_press", x=0.5, y=0.53, amount=3.0), "mobile", True),
        # type differences
        (A("click", x=0.5, y=0.5), A("double_click", x=0.5, y=0.5), "desktop", False),
        (A("click", x=0.5, y=0.5), A("right_click", x=0.5, y=0.5), "desktop", False),
        (A("click", x=0.5, y=0.5), A("long_press", x=0.5, y=0.5), "mobile", False),
        (A("scroll", direction="up"), A("swipe", x=0.5, y=0.5, direction="up"), "mobile", False),
        # drags: both ends
        (A("drag", x=0.1, y=0.1, x2=0.5, y2=0.5), A("drag", x=0.11, y=0.1, x2=0.5, y2=0.51), "desktop", True),
        (A("drag", x=0.1, y=0.1, x2=0.5, y2=0.5), A("drag", x=0.1, y=0.1, x2=0.52, y2=0.5), "desktop", False),
        # scroll / swipe by direction
        (A("scroll", direction="down", amount=-5), A("scroll", direction="down", amount=-1), "desktop", True),
        (A("scroll", direction="down"), A("scroll", direction="up"), "desktop", False),
        (A("swipe", x=0.5, y=0.8, x2=0.5, y2=0.2), A("swipe", x=0.1, y=0.9, direction="up"), "mobile", True),
        (A("swipe", x=0.5, y=0.8, x2=0.5, y2=0.2), A("swipe", x=0.5, y=0.2, x2=0.5, y2=0.8), "mobile", False),
        # text
        (A("type", text="Hello  World\n"), A("type", text="hello world"), "desktop", True),
        (A("type", text="hello"), A("type", text="hello!"), "desktop", False),
        (A("type", text="hello", x=0.1, y=0.1), A("type", text="hello"), "desktop", True),
        (A("open_app", text="Google Chrome"), A("open_app", text="google  chrome "), "mobile", True),
        (A("open_app", text="Chrome"), A("open_app", text="Settings"), "mobile", False),
        (A("answer", text="42 Items"), A("answer", text="42 items"), "mobile", True),
        (A("answer", text="42"), A("answer", text="43"), "mobile", False),
        # keys
        (A("hotkey", keys=("ctrl", "c")), A("hotkey", keys=("C", "Control")), "desktop", True),
        (A("hotkey", keys=("cmd", "space")), A("hotkey", keys=("win", "space")), "desktop", True),
        (A("hotkey", keys=("command", "v")), A("hotkey", keys=("winleft", "v")), "desktop", True),
        (A("key", keys=("return",)), A("hotkey", keys=("enter",)), "desktop", True),
        (A("hotkey", keys=("ctrl", "c")), A("hotkey", keys=("ctrl", "v")), "desktop", False),
        (A("hotkey", keys=("ctrl", "shift", "t")), A("hotkey", keys=("ctrl", "t")), "desktop", False),
        # status / no-argument actions
        (A("done", status="success"), A("done", status="success"), "mobile", True),
        (A("done", status="success"), A("done", status="failure"), "mobile", False),
        (A("back"), A("back"), "mobile", True),
        (A("back"), A("home"), "mobile", False),
        (A("wait", amount=1.0), A("wait", amount=5.0), "mobile", True),
    ],
)
def test_equivalence_table(ref: Action, got: Action, platform, expected: bool) -> None:
    assert actions_equivalent(ref, got, platform=platform) is expected


@pytest.mark.parametrize(
    ("point", "platform", "expected"),
    [
        ((0.5, 0.45), "desktop", True),
        ((0.599, 0.499), "desktop", True),  # inside the box, far beyond the 0.014 radius
        ((0.61, 0.45), "desktop", False),  # outside the box although the radius would not matter
        ((0.61, 0.45), "mobile", True),  # inside the 1.2x box
        ((0.5, 0.505), "mobile", True),
        ((0.625, 0.45), "mobile", False),  # beyond 0.5 + 0.12
        ((0.5, 0.515), "mobile", False),  # beyond 0.45 + 0.06
    ],
)
def test_reference_box_rules(point, platform, expected: bool) -> None:
    ref = A("click", x=0.5, y=0.45, box=BOX)
    got = A("click", x=point[0], y=point[1])
    assert actions_equivalent(ref, got, platform=platform) is expected


def test_box_is_taken_from_the_reference_only() -> None:
    boxed = A("click", x=0.5, y=0.45, box=BOX)
    far = A("click", x=0.59, y=0.45)
    assert actions_equivalent(boxed, far)
    assert not actions_equivalent(far, boxed)  # `far` has no box: radius rule, 0.09 > 0.014


def test_custom_tolerance() -> None:
    ref, got = A("click", x=0.5, y=0.5), A("click", x=0.53, y=0.5)
    assert not actions_equivalent(ref, got)
    assert actions_equivalent(ref, got, tolerance=Tolerance(desktop_radius=0.05))
    assert not actions_equivalent(ref, got, platform="mobile", tolerance=Tolerance(mobile_radius=0.01))
    loose_box = Tolerance(box_scale=2.0)
    assert actions_equivalent(A("click", x=0.5, y=0.45, box=BOX), A("click", x=0.69, y=0.45), platform="mobile",
                              tolerance=loose_box)  # fmt: skip


def test_exact_text_tolerance() -> None:
    ref, got = A("type", text="Hello"), A("type", text="hello")
    assert actions_equivalent(ref, got)
    assert not actions_equivalent(ref, got, tolerance=Tolerance(text="exact"))


@pytest.mark.parametrize(
    "kwargs",
    [{"desktop_radius": -1.0}, {"mobile_radius": float("nan")}, {"box_scale": -2.0}, {"text": "fuzzy"}],
)
def test_bad_tolerance_rejected(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        Tolerance(**kwargs)


def test_parsed_synonyms_are_equivalent() -> None:
    screen = (1921, 1081)
    left = parse_action('{"action": "left_click", "coordinate": [960, 540]}', screen_size=screen)
    code = parse_action("pyautogui.click(960, 540)", screen_size=screen)
    double = parse_action("pyautogui.doubleClick(960, 540)", screen_size=screen)
    assert actions_equivalent(left, code)
    assert not actions_equivalent(left, double)
    hotkey = parse_action("pyautogui.hotkey('Control', 'C')")
    assert actions_equivalent(hotkey, parse_action('{"action": "hotkey", "keys": ["ctrl", "c"]}'))
