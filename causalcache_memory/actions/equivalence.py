"""Full-action equivalence: same type, same arguments, coordinates within a tolerance.

The paper uses this relation to mine recurring target actions and to score offline accuracy (type,
arguments and coordinates within tolerance). Defaults follow public GUI-agent evaluators:

* a triple click (a ``click`` with ``amount = 3``) is never equivalent to a single click;
* a pointer is correct when it lies inside the *reference* action's target ``box`` (desktop: the box as
  is; mobile: the box scaled by ``box_scale`` about its centre), or, without a box, when its Euclidean
  distance to the reference point in relative coordinates is ``<= radius`` (desktop ``0.014``, mobile
  ``0.04``); drags check the start point that way and the end point by radius;
* typed text, answers and app names match after :func:`~.normalize.normalize_text` (or exactly);
* hotkeys/keys match as sets of canonical key names (``key`` and ``hotkey`` are the same kind);
* scrolls and swipes match by direction, done by status; back/home/wait by type alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from causalcache_memory.actions.coords import direction_of
from causalcache_memory.actions.model import TRIPLE_CLICKS, Action
from causalcache_memory.actions.normalize import normalize_keys, normalize_text
from causalcache_memory.errors import ActionParseError, ConfigError

__all__ = ["Tolerance", "actions_equivalent"]

_KIND = {"hotkey": "key"}


@dataclass(frozen=True)
class Tolerance:
    """Tolerances of :func:`actions_equivalent`.

    Attributes:
        desktop_radius: largest relative distance between pointers on desktop (no box).
        mobile_radius: largest relative distance between pointers on mobile (no box).
        box_scale: factor by which a mobile target box is enlarged about its centre.
        text: ``"normalized"`` (casefold, strip, collapse whitespace, drop trailing enter) or ``"exact"``.
    """

    desktop_radius: float = 0.014
    mobile_radius: float = 0.04
    box_scale: float = 1.2
    text: Literal["normalized", "exact"] = "normalized"

    def __post_init__(self) -> None:
        for name in ("desktop_radius", "mobile_radius", "box_scale"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise ConfigError(f"Tolerance.{name}={value!r} must be a finite number >= 0")
        if self.text not in ("normalized", "exact"):
            raise ConfigError(f"Tolerance.text={self.text!r} must be 'normalized' or 'exact'")


def _near(ref: tuple[float, float], got: tuple[float, float], radius: float) -> bool:
    return math.hypot(ref[0] - got[0], ref[1] - got[1]) <= radius + 1e-12


def _in_box(box: tuple[float, float, float, float], got: tuple[float, float], scale: float) -> bool:
    cx, cy = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    hw, hh = (box[2] - box[0]) / 2 * scale, (box[3] - box[1]) / 2 * scale
    return abs(got[0] - cx) <= hw + 1e-12 and abs(got[1] - cy) <= hh + 1e-12


def _point_ok(ref: Action, got: Action, platform: str, tol: Tolerance) -> bool:
    if ref.x is None or ref.y is None or got.x is None or got.y is None:
        return ref.x is None and got.x is None
    point = (got.x, got.y)
    if ref.box is not None:
        return _in_box(ref.box, point, tol.box_scale if platform == "mobile" else 1.0)
    return _near((ref.x, ref.y), point, tol.mobile_radius if platform == "mobile" else tol.desktop_radius)


def _text_ok(a: str | None, b: str | None, tol: Tolerance) -> bool:
    if tol.text == "exact":
        return a == b
    return normalize_text(a) == normalize_text(b)


def _direction(action: Action) -> str | None:
    if action.direction is not None:
        return action.direction
    if None not in (action.x, action.y, action.x2, action.y2):
        return direction_of(action.x, action.y, action.x2, action.y2)  # type: ignore[arg-type]
    return None


def actions_equivalent(
    a: Action,
    b: Action,
    *,
    platform: Literal["desktop", "mobile"] = "desktop",
    tolerance: Tolerance | None = None,
) -> bool:
    """Whether ``b`` is equivalent to the reference action ``a`` (the box, if any, is taken from ``a``)."""
    if platform not in ("desktop", "mobile"):
        raise ActionParseError(f"platform={platform!r} must be 'desktop' or 'mobile'")
    tol = tolerance or Tolerance()
    if _KIND.get(a.type, a.type) != _KIND.get(b.type, b.type):
        return False
    t = a.type
    if t == "click" and (a.amount == TRIPLE_CLICKS) != (b.amount == TRIPLE_CLICKS):
        return False
    if t in ("click", "double_click", "right_click", "long_press", "move"):
        return _point_ok(a, b, platform, tol)
    if t == "drag":
        radius = tol.mobile_radius if platform == "mobile" else tol.desktop_radius
        return _point_ok(a, b, platform, tol) and _near((a.x2, a.y2), (b.x2, b.y2), radius)  # type: ignore[arg-type]
    if t in ("scroll", "swipe"):
        return _direction(a) == _direction(b)
    if t in ("type", "open_app", "answer"):
        return _text_ok(a.text, b.text, tol)
    if t in ("hotkey", "key"):
        return normalize_keys(a.keys) == normalize_keys(b.keys)
    if t == "done":
        return (a.status or "success") == (b.status or "success")
    return True  # back, home, wait: the type is the whole action
