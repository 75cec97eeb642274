"""Typed GUI actions: the model, parsers from policy outputs, renderers and full-action equivalence."""

from .coords import CoordMode, CoordSystem
from .equivalence import Tolerance, actions_equivalent
from .mobile import parse_mobile_json
from .model import ACTION_TYPES, POINTER_TYPES, Action, ActionType
from .normalize import normalize_key, normalize_keys, normalize_text
from .parse import ACCEPTED_FORMATS, parse_action
from .pyautogui import parse_pyautogui
from .render import compose_response, render_action

__all__ = [
    "ACCEPTED_FORMATS",
    "ACTION_TYPES",
    "POINTER_TYPES",
    "Action",
    "ActionType",
    "CoordMode",
    "CoordSystem",
    "Tolerance",
    "actions_equivalent",
    "compose_response",
    "normalize_key",
    "normalize_keys",
    "normalize_text",
    "parse_action",
    "parse_mobile_json",
    "parse_pyautogui",
    "render_action",
]
