"""Find the action inside a full policy response and parse it.

When the response has a line starting with ``Action:``, only the text after the last such line is
searched (so a thought cannot be mistaken for the action); otherwise the whole response. Within it, the
first of these is parsed (its errors are reported; later candidates are not tried, so a malformed action
is never silently replaced by something else):

1. the content of ``<tool_call>...</tool_call>`` (JSON);
2. a fenced block (```` ```python ```` / ```` ```json ```` / bare ```` ``` ````), JSON when tagged ``json``
   or starting with ``{``, else PyAutoGUI code;
3. text starting with ``{`` (JSON);
4. text that is code as a whole (imports, action calls, sentinels; e.g. OSWorld's
   ``import pyautogui; pyautogui.click(1, 2)`` on one line or a bare ``click(10, 20)``);
5. PyAutoGUI lines (``pyautogui.*``, ``computer.*``, ``time.sleep``, ``DONE``/``WAIT``/``FAIL``);
6. the first JSON object naming an action (``action``/``action_type``/``name``);
7. after ``Action:`` only: the rest of the text as code (e.g. a bare ``click(10, 20)``).

An already decoded JSON action (a mapping) is parsed as JSON directly.

``platform="mobile"`` accepts only JSON; ``"desktop"`` and ``"auto"`` accept both (GUI-Owl writes desktop
actions as JSON tool calls).

This is the one action parser: the runtime parses policy replies with it and every dataset loader
(``lab/data/loaders``) parses the stored actions with it, so an imported event and a deployed event
of the same action are the same :class:`Action`. Code forms: :mod:`.pyautogui` (including AgentNet /
OpenCUA ``computer.*`` calls and ``hotkey([...])`` lists); JSON forms: :mod:`.mobile` (mobile actions,
tool calls, :meth:`Action.to_dict` output). :func:`read_action` stops before the coordinate conversion,
so a loader can decide one coordinate system for a whole trajectory (:func:`.coords.decide_system`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, Literal

from causalcache_memory.actions.coords import CoordMode, RawAction, build_action
from causalcache_memory.actions.mobile import read_mobile_json
from causalcache_memory.actions.model import ACTION_TYPES, Action
from causalcache_memory.actions.pyautogui import is_pyautogui_code, read_pyautogui
from causalcache_memory.errors import ActionParseError

__all__ = ["ACCEPTED_FORMATS", "parse_action", "read_action"]

Platform = Literal["auto", "desktop", "mobile"]

ACCEPTED_FORMATS = (
    "a ```python block or bare pyautogui.* / computer.* lines (desktop), a JSON object such as "
    '{"action": "click", "coordinate": [x, y]} (optionally inside <tool_call>...</tool_call> or '
    '{"name": ..., "arguments": {...}}), or either after an "Action:" line'
)
_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[ \t]*\n?(.*?)```", re.S)
_ACTION_LINE = re.compile(r"^[ \t*#]*Action[ \t*]*:[ \t*]*", re.M | re.I)
_CODE_LINE = re.compile(r"^\s*((?:pyautogui|computer|time)\.\w+\s*\(.*|DONE|WAIT|FAIL)\s*$", re.M)
_ACTION_KEYS = ("action", "action_type", "name", "function")


def _json_object(text: str) -> str | None:
    """The first decodable JSON object in ``text`` naming an action, re-encoded, or None."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and (any(k in obj for k in _ACTION_KEYS) or obj.get("type") in ACTION_TYPES):
            return json.dumps(obj)
    return None


def _kind(snippet: str, lang: str = "") -> Literal["json", "code"]:
    return "json" if lang.lower() == "json" or snippet.lstrip().startswith("{") else "code"


def _search(text: str) -> tuple[Literal["json", "code"], str] | None:
    if match := _TOOL_CALL.search(text):
        return "json", match.group(1)
    if match := _FENCE.search(text):
        return _kind(match.group(2), match.group(1)), match.group(2).strip()
    if text.lstrip().startswith("{"):
        return "json", text.strip()
    if is_pyautogui_code(text):
        return "code", text.strip()
    lines = [m.group(1) for m in _CODE_LINE.finditer(text)]
    if lines:
        return "code", "\n".join(lines)
    if found := _json_object(text):
        return "json", found
    return None


def _candidate(text: str) -> tuple[Literal["json", "code"], str] | None:
    """The action snippet: searched after the last ``Action:`` line when there is one, else everywhere."""
    matches = list(_ACTION_LINE.finditer(text))
    if matches:
        rest = text[matches[-1].end() :].strip()
        if rest:
            return _search(rest) or ("code", rest)
    return _search(text)


def _load_json(snippet: str) -> Any:
    try:
        return json.loads(snippet)
    except json.JSONDecodeError as err:
        found = _json_object(snippet)
        if found is not None:
            return json.loads(found)
        raise ActionParseError(
            f"bad JSON action ({err.msg} at line {err.lineno} column {err.colno}): {snippet[:120]!r}"
        ) from None


def read_action(text: str | Mapping[str, Any], *, platform: Platform = "auto") -> RawAction:
    """The action of a full response (or a decoded JSON action) with its coordinates as written.

    Raises:
        ActionParseError: as :func:`parse_action`.
    """
    if platform not in ("auto", "desktop", "mobile"):
        raise ActionParseError(f"platform={platform!r} must be 'auto', 'desktop' or 'mobile'")
    if isinstance(text, Mapping):
        return read_mobile_json(dict(text))
    if not isinstance(text, str) or not text.strip():
        raise ActionParseError(f"empty response {text!r}: no action to parse; expected {ACCEPTED_FORMATS}")
    found = _candidate(text)
    if found is None:
        raise ActionParseError(f"no action found in the response {text[:120]!r}; expected {ACCEPTED_FORMATS}")
    kind, snippet = found
    if kind == "code" and platform == "mobile":
        raise ActionParseError(
            f"platform='mobile' expects a JSON action, found code {snippet[:80]!r}; expected e.g. "
            '{"action": "click", "coordinate": [x, y]}'
        )
    if kind == "json":
        return read_mobile_json(_load_json(snippet))
    return read_pyautogui(snippet)


def parse_action(
    text: str | Mapping[str, Any],
    *,
    platform: Platform = "auto",
    screen_size: tuple[int, int] | None = None,
    coords: CoordMode = "auto",
) -> Action:
    """Parse the action of a full model response (thought + action) into an :class:`Action`.

    ``text`` may also be an already decoded JSON action (a mapping), as datasets store them.

    Raises:
        ActionParseError: no action was found, or the one found is malformed; the message says what
            was wrong and which formats are accepted.
    """
    raw = read_action(text, platform=platform)
    return build_action(raw, screen_size=screen_size, coords=coords)
