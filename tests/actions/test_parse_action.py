"""Finding the action inside a full model response."""

from __future__ import annotations

import pytest

from causalcache_memory.actions import ACCEPTED_FORMATS, Action, parse_action
from causalcache_memory.errors import ActionParseError

SCREEN = (1921, 1081)
CLICK = Action("click", x=0.5, y=0.5)


@pytest.mark.parametrize(
    ("text", "platform"),
    [
        ("```python\npyautogui.click(960, 540)\n```", "auto"),
        ("Thought: the button is centred.\n```python\nimport pyautogui\npyautogui.click(960, 540)\n```", "desktop"),
        ("I will click.\n```\npyautogui.click(960, 540)\n```", "auto"),
        ("Let me click the OK button.\npyautogui.click(960, 540)\n", "auto"),
        ("Thought: click it\nAction: pyautogui.click(960, 540)", "auto"),
        ("Thought: click it\nAction: click(960, 540)", "desktop"),
        ("Thought: click it\n**Action:** pyautogui.click(960, 540)", "auto"),
        ('Thought: tap {"the" button}\nAction: {"action": "click", "coordinate": [960, 540]}', "mobile"),
        ('<tool_call>\n{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [960, 540]}}\n'
         "</tool_call>", "mobile"),
        ('Thought: x\nAction: Tap OK.\n<tool_call>{"name": "computer_use", "arguments": '
         '{"action": "left_click", "coordinate": [960, 540]}}</tool_call>', "desktop"),
        ('<tool_call>{"name": "mobile_use", "arguments": {"action": "click", "coordinate": [960, 540]}}', "auto"),
        ('```json\n{"action": "click", "coordinate": [960, 540]}\n```', "mobile"),
        ('The answer: {"action_type": "click", "x": 960, "y": 540} done.', "auto"),
        ("Thought: a { brace\nAction:\n```python\npyautogui.click(960, 540)\n```", "auto"),
    ],
)  # fmt: skip
def test_finds_action_in_response(text: str, platform) -> None:
    assert parse_action(text, platform=platform, screen_size=SCREEN) == CLICK


def test_multi_line_code_after_action_line() -> None:
    text = "Thought: drag the file\nAction: pyautogui.moveTo(480, 270)\npyautogui.dragTo(960, 540)"
    assert parse_action(text, screen_size=SCREEN) == Action("drag", x=0.25, y=0.25, x2=0.5, y2=0.5)


def test_library_serialization_in_response() -> None:
    assert parse_action('Chose {"type": "click", "x": 0.5, "y": 0.5} here.') == CLICK


def test_sentinel_in_response() -> None:
    assert parse_action("Thought: finished.\nAction: DONE") == Action("done", status="success")
    assert parse_action("All set.\nDONE") == Action("done", status="success")


@pytest.mark.parametrize(
    ("text", "kwargs", "message"),
    [
        ("", {}, "empty response"),
        ("   ", {}, "empty response"),
        ("I do not know what to do.", {}, "no action found"),
        ("Action: pyautogui.click(960, 540)", {"platform": "mobile"}, "expects a JSON action"),
        ('<tool_call>{"name": "mobile_use", "arguments": {"action": </tool_call>', {}, "bad JSON"),
        ("Action: os.system('reboot')", {}, "os.system"),
        ("Action: pyautogui.explode()", {}, "unknown function"),
        ('Action: {"action": "click"}', {}, "needs a point"),
        ("Action: click(a, b)", {}, "literal"),
        ("Action: pyautogui.click(1, 2)", {"platform": "tablet"}, "platform="),
    ],
)
def test_response_errors(text: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action(text, **kwargs)
    assert message in str(info.value)


def test_error_lists_accepted_formats() -> None:
    with pytest.raises(ActionParseError) as info:
        parse_action("nothing here")
    assert ACCEPTED_FORMATS in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("computer.triple_click(x=0.5, y=0.25)", Action("click", x=0.5, y=0.25, amount=3)),
        ("Thought: select the line\nAction:\n```python\ncomputer.triple_click(x=0.5, y=0.25)\n```",
         Action("click", x=0.5, y=0.25, amount=3)),
        ("pyautogui.tripleClick(0.5, 0.25)", Action("click", x=0.5, y=0.25, amount=3)),
        ("pyautogui.click(0.5, 0.25, clicks=3)", Action("click", x=0.5, y=0.25, amount=3)),
        ("pyautogui.hotkey(['ctrl', 'end'])", Action("hotkey", keys=("ctrl", "end"))),
        ("pyautogui.hotkey('ctrl', 'end')", Action("hotkey", keys=("ctrl", "end"))),
        ("pyautogui.hotkey(keys=['ctrl', 'end'])", Action("hotkey", keys=("ctrl", "end"))),
        ("Action: computer.hotkey(['ctrl', 'end'])", Action("hotkey", keys=("ctrl", "end"))),
        ("import pyautogui; pyautogui.click(0.5, 0.25)", Action("click", x=0.5, y=0.25)),
        ('{"action": "triple_click", "coordinate": [0.5, 0.25]}', Action("click", x=0.5, y=0.25, amount=3)),
    ],
)  # fmt: skip
def test_accepts_the_forms_the_importers_accept(text: str, expected: Action) -> None:
    """The runtime reply parser reads AgentNet/OpenCUA ``computer.*`` calls and hotkey lists (issue 25:
    it used to reject ``computer.triple_click(...)`` and ``hotkey(['ctrl', 'end'])``)."""
    assert parse_action(text, platform="desktop") == expected


def test_decoded_json_action_is_accepted() -> None:
    assert parse_action({"action": "click", "coordinate": [960, 540]}, screen_size=SCREEN) == CLICK


def test_triple_click_is_not_a_single_click() -> None:
    from causalcache_memory.actions import actions_equivalent, render_action

    triple = parse_action("computer.triple_click(x=0.5, y=0.5)")
    assert not actions_equivalent(triple, CLICK) and not actions_equivalent(CLICK, triple)
    assert actions_equivalent(triple, parse_action("pyautogui.tripleClick(960, 540)", screen_size=SCREEN))
    for fmt in ("pyautogui", "json"):
        text = render_action(triple, fmt=fmt, coords="relative")
        assert parse_action(text) == triple, text


def test_action_repr_shows_only_the_set_fields() -> None:
    """Issue 51 item 4: the README's ``Action(type='click', x=0.86, y=0.96)``, and it evaluates back."""
    from causalcache_memory.actions.model import Action

    click = Action("click", x=0.86, y=0.96)
    assert repr(click) == str(click) == "Action(type='click', x=0.86, y=0.96)"
    assert eval(repr(click)) == click
    keys = Action("hotkey", keys=("ctrl", "c"))
    assert repr(keys) == "Action(type='hotkey', keys=('ctrl', 'c'))" and eval(repr(keys)) == keys
