"""The action vocabularies of the synthetic world: how a world expresses navigation (docs/WORLD.md).

Every world plans with the same canonical navigation operations (``open_app``, ``back``, ``home``;
:func:`~causalcache_lab.world.language.plan_goal`) and expresses them in its vocabulary:

===========  ============================================================  ===================================
vocabulary   navigation                                                    splits
===========  ============================================================  ===================================
``touch``    ``open_app "Shop"``, ``back``, ``home`` (world v2)            training, development
``keys``     ``hotkey ctrl+<n>`` (n: the app's launcher position),         training, development
             ``key escape``, ``hotkey ctrl+h``
``slash``    typed ``/shop``, ``/back``, ``/home`` (undo: ``/undo``)       ``devtype`` only
``command``  typed ``open Shop``, ``go back``, ``go home`` (undo: ``undo``)  held-out only
===========  ============================================================  ===================================

Everything else (taps, typing into a field, scrolling) is the same everywhere. ``slash`` and ``command``
both navigate by typing, so a navigation step is a ``type`` event as a typed value is; ``slash`` gives the
development worlds of adaptation methods that shape without the held-out vocabulary's words
(:mod:`~causalcache_lab.world.family`, ``devtype``). :func:`encode` writes a canonical operation in a
vocabulary, :func:`decode` reads an action back (None: navigation of another vocabulary, which the world
ignores), :func:`summary_op` reads a summary line's operation.
"""

from __future__ import annotations

from dataclasses import dataclass

from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ConfigError

__all__ = ["UNDO", "VOCABS", "decode", "encode", "summary_op"]

VOCABS = ("touch", "keys", "slash", "command")
#: the target of a ``back`` that undoes a wrong navigation (and, in ``command``, its typed text)
UNDO = "undo"
_APPS = ("Shop", "Messages", "Notes", "Calendar", "Settings", "Browser", "Files")


@dataclass(frozen=True)
class _Typed:
    """A vocabulary that navigates by typing (no tap location): the texts of its operations."""

    open: str  # prefix of an app launch, followed by the app's name
    back: str
    home: str
    undo: str  # the ``back`` that undoes a wrong navigation
    lower_app: bool  # the app's name is typed in lower case

    def launch(self, app: str) -> str:
        return self.open + (app.lower() if self.lower_app else app)


_TYPED = {
    "slash": _Typed(open="/", back="/back", home="/home", undo="/undo", lower_app=True),
    "command": _Typed(open="open ", back="go back", home="go home", undo=UNDO, lower_app=False),
}


def _check(vocab: str) -> None:
    if vocab not in VOCABS:
        raise ConfigError(f"vocab={vocab!r} must be one of {', '.join(VOCABS)}")


def encode(vocab: str, op: str, app: str | None = None, target: str | None = None) -> Action:
    """The action expressing canonical ``op`` (``open_app``/``back``/``home``) in ``vocab``."""
    _check(vocab)
    if vocab == "touch" or op not in ("open_app", "back", "home"):
        if op == "open_app":
            return Action("open_app", text=app, target=target or app)
        return Action(op, target=target)  # type: ignore[arg-type]
    if vocab == "keys":
        if op == "open_app":
            return Action("hotkey", keys=("ctrl", str(_APPS.index(app or "") + 1)), target=target or app)
        if op == "back":
            return Action("key", keys=("escape",), target=target)
        return Action("hotkey", keys=("ctrl", "h"), target=target)
    typed = _TYPED[vocab]
    if op == "back" and target == UNDO:
        return Action("type", text=typed.undo, target=target)  # the typed command names the undo
    text = {"open_app": typed.launch(app or ""), "back": typed.back, "home": typed.home}[op]
    return Action("type", text=text, target=target)


def decode(vocab: str, action: Action) -> Action | None:
    """The canonical action ``action`` expresses in ``vocab``; None when it is navigation of another
    vocabulary (which the world ignores). Non-navigation actions are returned unchanged."""
    _check(vocab)
    kind = action.type
    if vocab == "touch":
        return action
    if kind in ("open_app", "back", "home"):
        return None
    if vocab == "keys":
        if kind == "key" and action.keys == ("escape",):
            return Action("back")
        if kind == "hotkey" and action.keys == ("ctrl", "h"):
            return Action("home")
        if (
            kind == "hotkey"
            and len(action.keys) == 2
            and action.keys[0] == "ctrl"
            and action.keys[1].isdigit()
        ):
            n = int(action.keys[1])
            return Action("open_app", text=_APPS[n - 1]) if 1 <= n <= len(_APPS) else None
        return action
    typed = _TYPED[vocab]
    if kind == "type" and action.x is None and action.text is not None:
        text = action.text.strip().lower()
        if text in (typed.back, typed.undo):
            return Action("back")
        if text == typed.home:
            return Action("home")
        if text.startswith(typed.open):
            name = next((a for a in _APPS if a.lower() == text[len(typed.open) :].strip()), None)
            return Action("open_app", text=name) if name else None
    return action


def summary_op(vocab: str, kind: str, rest: str) -> tuple[str, str]:
    """A summary line's ``(kind, rest)`` mapped to the canonical operation it records in ``vocab``
    (``rest`` of an app launch becomes ``"App"`` so that progress matching reads the app name)."""
    if vocab == "keys":
        if kind == "key" and rest.startswith(" escape"):
            return "back", rest[len(" escape") :]
        if kind == "hotkey" and rest.startswith(" ctrl+h"):
            return "home", rest[len(" ctrl+h") :]
        if kind == "hotkey" and rest.startswith(" ctrl+"):
            digit = rest[len(" ctrl+") :].split(" ", 1)[0]
            if digit.isdigit() and 1 <= int(digit) <= len(_APPS):
                return "open_app", f' "{_APPS[int(digit) - 1]}"'
    typed = _TYPED.get(vocab)
    if typed is not None and kind == "type" and not rest.startswith(" ("):
        text = rest.strip().strip('"').lower()
        if text in (typed.back, typed.home, typed.undo):
            return ("home" if text == typed.home else "back"), (f' "{UNDO}"' if text == typed.undo else "")
        if text.startswith(typed.open):
            return "open_app", f' "{text[len(typed.open) :].strip()}"'
    return kind, rest
