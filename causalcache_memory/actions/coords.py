"""Coordinate systems of policy outputs and their conversion to relative ``[0, 1]`` coordinates.

Three systems are read and written:

* ``relative``: ``[0, 1]`` fractions of the screen (what :class:`~.model.Action` stores);
* ``absolute``: pixels, ``0 .. width-1`` and ``0 .. height-1``; ``x_rel = x_px / (width - 1)``, the
  inverse of :meth:`Action.pixel`, so pixel positions round-trip exactly;
* ``thousand``: the ``[0, 1000]`` grid of several VLM policies; ``x_rel = x / 1000``.

``coords="auto"`` picks one system for *all* coordinates of an action — or, for an imported dataset, of
a whole trajectory (:func:`decide_system`: the loaders decide once per trajectory, from all its actions
and its screen size, and record the system in ``Trajectory.metadata["coords"]``) — deterministically:

1. every value is in ``[0, 1]`` and at least one is written as a float (``0.5``, ``1.0``) -> ``relative``
   (integer-only values such as ``click(1, 0)`` are never read as relative);
2. otherwise, when ``screen_size`` is given and at least :data:`PIXEL_SHARE` (90 %) of the points lie on
   the screen (``x <= width - 1``, ``y <= height - 1``, one pixel of slack) -> ``absolute`` (for one
   action of one or two points: all of them); a point off the screen is then an error for its action
   alone (a loader keeps that step as unparsed), never a reason to read the others as the grid;
3. otherwise, every value ``<= 1000`` -> ``thousand``;
4. otherwise an :class:`ActionParseError` names the value.

Out of range: an overshoot of at most one unit (1 px, one thousandth of the grid, ``0.001`` relative) is
clamped onto the screen edge; anything further out is rejected with an error naming the value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ActionParseError

__all__ = [
    "PIXEL_SHARE",
    "CoordMode",
    "CoordSystem",
    "RawAction",
    "build_action",
    "decide_system",
    "from_relative",
    "resolve_system",
]

CoordSystem = Literal["relative", "absolute", "thousand"]
CoordMode = Literal["auto", "relative", "absolute", "thousand"]
_MODES = ("auto", "relative", "absolute", "thousand")
_SLACK = {"relative": 1e-3, "absolute": 1.0, "thousand": 1.0}
#: share of the points that must lie on the screen for ``auto`` to read them as pixels (rule 2)
PIXEL_SHARE = 0.9

#: a number as written by the model: (value, written_as_float)
Num = tuple[float, bool]


@dataclass
class RawAction:
    """An action as read from model output, before its coordinates are converted.

    ``points`` holds the start and optional end point as written (numbers or numeric strings);
    ``default_point`` is a *relative* point used when ``points`` is empty (e.g. a swipe given only a
    direction starts at the screen centre); ``fields`` are the remaining :class:`Action` fields;
    ``system`` pins the coordinate system when the format itself says it (``Action.to_dict`` output is
    relative), else None.
    """

    type: str
    points: list[tuple[Any, Any]] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    default_point: tuple[float, float] | None = None
    system: CoordSystem | None = None


def number(value: Any, what: str) -> Num:
    """Read one coordinate value; numeric strings are accepted, booleans and text are not."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ActionParseError(
            f"{what}={value!r} is not a number; give coordinates as numbers, e.g. [540, 1200]"
        )
    if isinstance(value, str):
        text = value.strip()
        try:
            out = float(text)
        except ValueError:
            raise ActionParseError(f"{what}={value!r} is not a number; give coordinates as numbers") from None
        is_float = any(c in text for c in ".eE")
    else:
        out, is_float = float(value), isinstance(value, float)
    if not math.isfinite(out):
        raise ActionParseError(f"{what}={value!r} is not a finite number")
    return out, is_float


def _check_screen(screen_size: tuple[int, int] | None) -> tuple[int, int] | None:
    if screen_size is None:
        return None
    if len(screen_size) != 2 or any(not isinstance(v, int) or v < 2 for v in screen_size):
        raise ActionParseError(f"screen_size={screen_size!r} must be (width, height) in pixels, both >= 2")
    return screen_size[0], screen_size[1]


def resolve_system(
    points: list[tuple[Num, Num]], mode: str, screen_size: tuple[int, int] | None
) -> CoordSystem:
    """The coordinate system of ``points`` under ``mode`` (see the module docstring for the auto rule)."""
    if mode not in _MODES:
        raise ActionParseError(f"coords={mode!r} is not a coordinate system; use one of {', '.join(_MODES)}")
    screen = _check_screen(screen_size)
    if mode == "absolute" and screen is None:
        raise ActionParseError("coords='absolute' needs screen_size=(width, height) to convert pixels")
    if mode != "auto":
        return mode  # type: ignore[return-value]
    values = [n for p in points for n in p]
    for v, _ in values:
        if v < -_SLACK["relative"]:
            raise ActionParseError(f"coordinate value {v:g} is negative; coordinates must lie on the screen")
    if all(v <= 1.0 + _SLACK["relative"] for v, _ in values) and any(f for _, f in values):
        return "relative"
    if screen is not None and points:
        on_screen = sum(
            x <= screen[0] - 1 + _SLACK["absolute"] and y <= screen[1] - 1 + _SLACK["absolute"]
            for (x, _), (y, _) in points
        )
        if on_screen >= PIXEL_SHARE * len(points):
            return "absolute"
    if all(v <= 1000 + _SLACK["thousand"] for v, _ in values):
        return "thousand"
    worst = max(v for v, _ in values)
    where = f"the screen {screen[0]}x{screen[1]} and " if screen else ""
    raise ActionParseError(
        f"coordinate value {worst:g} is outside {where}the [0, 1000] grid; pass screen_size=(width, height) "
        "for pixel coordinates"
    )


def decide_system(
    raws: list[RawAction], mode: str, screen_size: tuple[int, int] | None
) -> CoordSystem | None:
    """One coordinate system for every action in ``raws`` (a trajectory), from all their points.

    ``mode`` other than ``auto`` is returned as is (checked); ``auto`` applies the module's rule to the
    points of every action at once (actions whose format pins the system are left out). None when no
    action has a point to decide from. Raises :class:`ActionParseError` when no system fits.
    """
    nums = [(number(px, "x"), number(py, "y")) for raw in raws if raw.system is None for px, py in raw.points]
    if mode == "auto" and not nums:
        return None
    return resolve_system(nums, mode, screen_size)


def to_relative(value: float, axis: int, system: CoordSystem, screen_size: tuple[int, int] | None) -> float:
    """Convert one value on ``axis`` (0: x, 1: y) to relative, clamping an overshoot of one unit."""
    top = {"relative": 1.0, "thousand": 1000.0}.get(system)
    if top is None:
        assert screen_size is not None
        top = float(screen_size[axis] - 1)
    slack = _SLACK[system]
    if not -slack <= value <= top + slack:
        name = "xy"[axis]
        raise ActionParseError(
            f"{name}={value:g} is outside the {system} range [0, {top:g}] by more than {slack:g}; "
            "check the coordinate system (coords=...) and screen_size"
        )
    return min(1.0, max(0.0, value / top))


def from_relative(
    x: float, y: float, system: CoordSystem, screen_size: tuple[int, int] | None
) -> tuple[float, float] | tuple[int, int]:
    """Relative ``(x, y)`` written in ``system``: floats for relative, integers otherwise."""
    if system == "relative":
        return round(x, 4), round(y, 4)
    if system == "thousand":
        return round(x * 1000), round(y * 1000)
    if system != "absolute":
        raise ValueError(f"coords={system!r} is not one of relative, absolute, thousand")
    screen = _check_screen(screen_size)
    if screen is None:
        raise ValueError("coords='absolute' needs screen_size=(width, height) to write pixels")
    return round(x * (screen[0] - 1)), round(y * (screen[1] - 1))


def build_action(raw: RawAction, *, screen_size: tuple[int, int] | None, coords: str) -> Action:
    """Convert ``raw``'s points with one coordinate system and construct the :class:`Action`."""
    nums = [(number(px, "x"), number(py, "y")) for px, py in raw.points]
    kwargs = dict(raw.fields)
    if nums:
        system = raw.system or resolve_system(nums, coords, screen_size)
        rel = [
            (to_relative(x[0], 0, system, screen_size), to_relative(y[0], 1, system, screen_size))
            for x, y in nums
        ]
        kwargs["x"], kwargs["y"] = rel[0]
        if len(rel) > 1:
            kwargs["x2"], kwargs["y2"] = rel[1]
    elif raw.default_point is not None:
        kwargs["x"], kwargs["y"] = raw.default_point
    if raw.type == "swipe" and kwargs.get("direction") is None and "x2" in kwargs:
        kwargs["direction"] = direction_of(kwargs["x"], kwargs["y"], kwargs["x2"], kwargs["y2"])
    return Action(type=raw.type, **kwargs)  # type: ignore[arg-type]


def direction_of(x: float, y: float, x2: float, y2: float) -> Literal["up", "down", "left", "right"]:
    """Direction of the movement from ``(x, y)`` to ``(x2, y2)`` along its dominant axis."""
    dx, dy = x2 - x, y2 - y
    if abs(dx) > abs(dy):
        return "right" if dx > 0 else "left"
    return "down" if dy > 0 else "up"
