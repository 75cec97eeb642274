"""Normalization of typed text, key names and app names, used by parsers and by equivalence."""

from __future__ import annotations

import re

__all__ = ["normalize_key", "normalize_keys", "normalize_text"]

_KEY_ALIASES = {
    "control": "ctrl", "ctrlleft": "ctrl", "ctrlright": "ctrl", "lctrl": "ctrl", "rctrl": "ctrl",
    "command": "cmd", "win": "cmd", "winleft": "cmd", "winright": "cmd", "windows": "cmd", "super": "cmd",
    "meta": "cmd", "cmdleft": "cmd", "cmdright": "cmd",
    "option": "alt", "optionleft": "alt", "optionright": "alt", "altleft": "alt", "altright": "alt",
    "shiftleft": "shift", "shiftright": "shift", "lshift": "shift", "rshift": "shift",
    "return": "enter", "\n": "enter", "esc": "escape", "del": "delete", "bksp": "backspace",
    "pgup": "pageup", "page_up": "pageup", "pgdn": "pagedown", "page_down": "pagedown",
    "arrowup": "up", "arrowdown": "down", "arrowleft": "left", "arrowright": "right",
    " ": "space", "spacebar": "space",
}  # fmt: skip
_TRAILING_ENTER = re.compile(r"(\s|\\n|\\r)+$")


def normalize_key(key: str) -> str:
    """Canonical key name: lower case, aliases merged (``Control`` -> ``ctrl``, ``win``/``command`` -> ``cmd``)."""
    lowered = key if key in (" ", "\n") else key.strip().lower()
    return _KEY_ALIASES.get(lowered, lowered)


def normalize_keys(keys: tuple[str, ...] | list[str]) -> frozenset[str]:
    """The set of canonical key names of a hotkey (order does not matter)."""
    return frozenset(normalize_key(k) for k in keys)


def normalize_text(text: str | None) -> str:
    """Casefold, strip, drop a trailing newline/enter and collapse whitespace runs to one space."""
    if text is None:
        return ""
    return " ".join(_TRAILING_ENTER.sub("", text.strip()).split()).casefold()
