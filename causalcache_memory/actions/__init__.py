"""Typed GUI actions: the model, parsers from policy outputs, renderers and full-action equivalence."""

from causalcache_memory.actions.coords import CoordMode, CoordSystem
from causalcache_memory.actions.equivalence import Tolerance, actions_equivalent
from causalcache_memory.actions.mobile import parse_mobile_json
from causalcache_memory.actions.model import ACTION_TYPES, POINTER_TYPES, Action, ActionType
from causalcache_memory.actions.normalize import normalize_key, normalize_keys, normalize_text
from causalcache_memory.actions.parse import ACCEPTED_FORMATS, parse_action
from causalcache_memory.actions.pyautogui import parse_pyautogui
from causalcache_memory.actions.render import compose_response, render_action

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
