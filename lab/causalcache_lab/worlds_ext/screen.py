"""Screens of the external-style generators: elements with roles and pixel boxes, their PNG, and a registry.

A :class:`Screen` is what a generator lays out for one state of its world: a list of :class:`Element`
(role, text, pixel box, resource id, what a click on it does). :func:`render` draws it with PIL's bitmap
font at a small size (a few ms for 300 elements) and registers the PNG's SHA-256 in
:data:`REGISTRY`, so the simulated policies can "see" the screens of their prompt (they look the
screen up by the image's hash, as a VLM reads the pixels) and the harness's screen-text source can
serialise the same screen in the generator's own text format.

Rows: elements whose vertical centres lie within :data:`ROW_TOLERANCE` pixels are one visual row
(:meth:`Screen.rows`, top to bottom, left to right); the policies' reading rules work on rows.
"""

from __future__ import annotations

import hashlib
import io
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache

__all__ = ["REGISTRY", "ROW_TOLERANCE", "Element", "Screen", "ScreenRegistry", "render", "screen_clock"]

#: vertical centres closer than this (pixels) are one visual row
ROW_TOLERANCE = 3.0

_ROLE_FILL: dict[str, tuple[int, int, int]] = {
    "button": (214, 222, 236),
    "field": (255, 255, 255),
    "menubar": (232, 232, 236),
    "taskbar": (206, 210, 218),
    "statusbar": (226, 228, 234),
    "titlebar": (70, 96, 150),
    "card": (248, 248, 252),
    "tab": (226, 230, 238),
    "urlbar": (240, 242, 246),
    "cell": (252, 252, 252),
    "header": (200, 210, 226),
    "nav": (236, 238, 244),
}
_DARK_ROLES = {"titlebar"}
#: the bitmap font is latin-1: box drawing is drawn with its ASCII look-alikes
_DRAWABLE = str.maketrans({"─": "-", "│": "|", "┌": "+", "┐": "+", "└": "+", "┘": "+"})


def _drawable(text: str) -> str:
    return text.translate(_DRAWABLE).encode("latin-1", "replace").decode("latin-1")


@dataclass(frozen=True, slots=True)
class Element:
    """One on-screen element.

    Attributes:
        role: accessibility role (``text``, ``button``, ``field``, ``cell``, ``menuitem``, ``link`` ...).
        text: the drawn text ('' for pure containers).
        box: pixel box ``(x0, y0, x1, y1)`` on the screen.
        rid: resource id (Android ``resource-id``, DOM id); never drawn.
        on_click: what a click does (``open:<item>``, ``form``, ``submit``, ``field:<name>``, ``nav:<app>``),
            or None.
    """

    role: str
    text: str
    box: tuple[int, int, int, int]
    rid: str = ""
    on_click: str | None = None

    @property
    def cy(self) -> float:
        return (self.box[1] + self.box[3]) / 2.0


@dataclass(frozen=True)
class Screen:
    """One laid-out screen.

    Attributes:
        generator: the generator that laid it out (``desktop``, ``web``, ``mobile``).
        size: ``(width, height)`` in pixels.
        elements: every element, chrome included, in drawing order.
        app: the app (or site) shown.
        title: the window / page / screen title.
        background: background RGB.
    """

    generator: str
    size: tuple[int, int]
    elements: tuple[Element, ...]
    app: str = ""
    title: str = ""
    background: tuple[int, int, int] = (244, 245, 248)

    def rows(self) -> list[list[Element]]:
        """Text elements grouped into visual rows (top to bottom; each row left to right)."""
        texts = sorted((e for e in self.elements if e.text), key=lambda e: (e.cy, e.box[0]))
        rows: list[list[Element]] = []
        for e in texts:
            if rows and abs(rows[-1][0].cy - e.cy) <= ROW_TOLERANCE:
                rows[-1].append(e)
            else:
                rows.append([e])
        return [sorted(r, key=lambda e: e.box[0]) for r in rows]

    def find(self, text: str) -> Element | None:
        """The first element (drawing order) whose text is exactly ``text``."""
        return next((e for e in self.elements if e.text == text), None)

    def at(self, x: float, y: float) -> Element | None:
        """The topmost clickable element under the pixel point ``(x, y)`` (None when there is none)."""
        for e in reversed(self.elements):
            if e.on_click and e.box[0] <= x <= e.box[2] and e.box[1] <= y <= e.box[3]:
                return e
        return None

    def text_lines(self) -> int:
        """Number of text elements (the screen's density)."""
        return sum(1 for e in self.elements if e.text)


class ScreenRegistry:
    """SHA-256 of a rendered PNG -> its :class:`Screen` (thread-safe LRU)."""

    def __init__(self, maxsize: int = 65536) -> None:
        self._items: OrderedDict[str, Screen] = OrderedDict()
        self._lock = threading.Lock()
        self.maxsize = maxsize

    def put(self, sha256: str, screen: Screen) -> None:
        with self._lock:
            self._items[sha256] = screen
            self._items.move_to_end(sha256)
            while len(self._items) > self.maxsize:
                self._items.popitem(last=False)

    def get(self, sha256: str) -> Screen | None:
        with self._lock:
            return self._items.get(sha256)


#: the process-wide registry every :func:`render` call fills
REGISTRY = ScreenRegistry()


@lru_cache(maxsize=1)
def _font():  # type: ignore[no-untyped-def]
    from PIL import ImageFont

    return ImageFont.load_default_imagefont()  # the bitmap font: ~4x faster than the FreeType default


@lru_cache(maxsize=4096)
def _png(screen: Screen) -> bytes:
    from PIL import Image, ImageDraw

    img = Image.new("RGB", screen.size, screen.background)
    draw = ImageDraw.Draw(img)
    font = _font()
    dark = sum(screen.background) < 200  # a terminal: light ink on every element
    for e in screen.elements:
        fill = _ROLE_FILL.get(e.role)
        if fill is not None:
            draw.rectangle(e.box, fill=fill, outline=(180, 186, 196) if e.role not in _DARK_ROLES else None)
        if e.text:
            ink = (240, 240, 240) if dark or e.role in _DARK_ROLES else (24, 26, 30)
            draw.text((e.box[0] + 2, e.box[1] + 1), _drawable(e.text), fill=ink, font=font)
    buf = io.BytesIO()
    img.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def render(screen: Screen, registry: ScreenRegistry = REGISTRY) -> tuple[bytes, str]:
    """The screen's PNG and its SHA-256 (hex); registers the screen under that hash in ``registry``."""
    png = _png(screen)
    sha = hashlib.sha256(png).hexdigest()
    registry.put(sha, screen)
    return png, sha


def screen_clock(step: int, *, twelve: bool = False) -> str:
    """The clock a screen shows at ``step`` (one minute a step from 9:41)."""
    minutes = 9 * 60 + 41 + step
    h, m = divmod(minutes, 60)
    if twelve:
        return f"{(h - 1) % 12 + 1}:{m:02d} {'AM' if h < 12 else 'PM'}"
    return f"{h}:{m:02d}"
