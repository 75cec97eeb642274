"""The typed GUI action shared by every runtime, the trace, the synthetic world and the selector.

Coordinates are always stored *relative* to the screen, in ``[0, 1]``: ``x`` grows to the right and ``y``
downwards. Parsers convert from absolute pixels and from the ``[0, 1000]`` grid used by several VLM
policies; renderers convert back. Storing relative coordinates makes equivalence independent of the
screen resolution.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from causalcache_memory.errors import ActionParseError

__all__ = ["ACTION_TYPES", "POINTER_TYPES", "TRIPLE_CLICKS", "Action", "ActionType"]

ActionType = Literal[
    "click",
    "double_click",
    "right_click",
    "long_press",
    "move",
    "drag",
    "swipe",
    "scroll",
    "type",
    "hotkey",
    "key",
    "open_app",
    "back",
    "home",
    "wait",
    "done",
    "answer",
]
ACTION_TYPES: tuple[str, ...] = get_args(ActionType)
#: action types whose ``(x, y)`` is required
POINTER_TYPES: frozenset[str] = frozenset(
    {"click", "double_click", "right_click", "long_press", "move", "drag", "swipe"}
)
_DIRECTIONS = ("up", "down", "left", "right")
#: ``Action.amount`` of a triple click: a ``click`` whose amount is 3 (single clicks leave it None)
TRIPLE_CLICKS = 3.0


@dataclass(frozen=True, slots=True)
class Action:
    """One GUI action.

    Attributes:
        type: the action kind (see :data:`ACTION_TYPES`).
        x, y: pointer position, relative ``[0, 1]`` (start point for ``drag``/``swipe``; optional
            anchor for ``scroll`` and ``type``).
        x2, y2: end point of a ``drag`` or ``swipe``, relative ``[0, 1]``.
        text: typed text (``type``), app name (``open_app``), answer text (``answer``).
        keys: key names for ``hotkey``/``key`` (lower case, e.g. ``("ctrl", "c")``).
        direction: ``up``/``down``/``left``/``right`` for ``scroll`` and ``swipe``.
        amount: scroll clicks (signed as in PyAutoGUI: positive scrolls up), wait / long-press seconds, or
            :data:`TRIPLE_CLICKS` (3) for a triple click (a ``click``; never equivalent to a single one).
        status: ``success``/``failure`` for ``done``.
        target: label of the UI element acted on, when known (summaries only, not equivalence).
        box: the target element's box ``(x0, y0, x1, y1)``, relative, when known (used by equivalence).
    """

    type: ActionType
    x: float | None = None
    y: float | None = None
    x2: float | None = None
    y2: float | None = None
    text: str | None = None
    keys: tuple[str, ...] = ()
    direction: Literal["up", "down", "left", "right"] | None = None
    amount: float | None = None
    status: Literal["success", "failure"] | None = None
    target: str | None = None
    box: tuple[float, float, float, float] | None = field(default=None)

    def __repr__(self) -> str:
        """Only the fields that are set, ``type`` first: ``Action(type='click', x=0.86, y=0.96)``."""
        shown = (
            f"{f.name}={getattr(self, f.name)!r}"
            for f in fields(self)
            if getattr(self, f.name) is not None and getattr(self, f.name) != ()
        )
        return f"Action({', '.join(shown)})"

    def __post_init__(self) -> None:
        if self.type not in ACTION_TYPES:
            raise ActionParseError(
                f"Action.type={self.type!r} is not a known action type; use one of {', '.join(ACTION_TYPES)}"
            )
        for name in ("x", "y", "x2", "y2"):
            value = getattr(self, name)
            if value is None:
                continue
            if not isinstance(value, (int, float)) or not math.isfinite(value) or not 0.0 <= value <= 1.0:
                raise ActionParseError(
                    f"Action.{name}={value!r} must be a relative coordinate in [0, 1]; "
                    "convert pixels with x/width (parsers in causalcache_memory.actions do this)"
                )
        if self.type in POINTER_TYPES and (self.x is None or self.y is None):
            raise ActionParseError(f"Action.type={self.type!r} needs x and y; got x={self.x!r}, y={self.y!r}")
        if self.type == "drag" and (self.x2 is None or self.y2 is None):
            raise ActionParseError(
                f"Action.type='drag' needs an end point x2, y2; got x2={self.x2!r}, y2={self.y2!r}"
            )
        if self.type in ("type", "open_app") and not self.text:
            raise ActionParseError(f"Action.type={self.type!r} needs non-empty text; got text={self.text!r}")
        if self.type in ("hotkey", "key") and not self.keys:
            raise ActionParseError(f"Action.type={self.type!r} needs keys; got keys={self.keys!r}")
        if self.direction is not None and self.direction not in _DIRECTIONS:
            raise ActionParseError(
                f"Action.direction={self.direction!r} must be one of {', '.join(_DIRECTIONS)}"
            )
        if self.status is not None and self.status not in ("success", "failure"):
            raise ActionParseError(f"Action.status={self.status!r} must be 'success' or 'failure'")
        if self.box is not None:
            if len(self.box) != 4 or not (self.box[0] <= self.box[2] and self.box[1] <= self.box[3]):
                raise ActionParseError(
                    f"Action.box={self.box!r} must be (x0, y0, x1, y1) with x0<=x1, y0<=y1"
                )
            object.__setattr__(self, "box", tuple(float(v) for v in self.box))
        if not isinstance(self.keys, tuple):
            object.__setattr__(self, "keys", tuple(self.keys))

    # ------------------------------------------------------------------ serialization
    def to_dict(self) -> dict[str, Any]:
        """JSON-serializable dict holding only the fields that are set."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or value == ():
                continue
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Action:
        """Inverse of :meth:`to_dict`; unknown keys raise :class:`ActionParseError`."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ActionParseError(f"unknown action field(s) {unknown}; allowed: {sorted(known)}")
        if "type" not in data:
            raise ActionParseError(f"action dict has no 'type': {dict(data)!r}")
        kwargs = dict(data)
        if "keys" in kwargs:
            kwargs["keys"] = tuple(kwargs["keys"])
        if kwargs.get("box") is not None:
            kwargs["box"] = tuple(kwargs["box"])
        return cls(**kwargs)

    def pixel(self, width: int, height: int) -> tuple[int, int] | None:
        """The pointer position in pixels for a ``width`` x ``height`` screen, or None."""
        if self.x is None or self.y is None:
            return None
        return round(self.x * (width - 1)), round(self.y * (height - 1))
