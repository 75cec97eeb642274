"""Screens of the synthetic world as element lists, and their rendering to pixels.

A :class:`Screen` is a list of :class:`Element` boxes in *cell* units (one cell is ``12 x 16`` px, see
:mod:`~causalcache_lab.world.font`); every box and every text is grid-aligned, which keeps the
world's OCR exact. :class:`Layout` stacks elements top to bottom for phone (``540 x 1170``) and desktop
(``1280 x 800``) screens. Rendering is plain numpy slicing plus glyph stamping into a palette-index canvas (every colour is in
:data:`PALETTE`), encoded as a palette PNG with Pillow: one byte per pixel, fast to write and read, and
deterministic bytes for a given Pillow version.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field

import numpy as np

from causalcache_lab.world.font import CELL_H, CELL_W, draw_text

__all__ = [
    "ACCENTS",
    "PALETTE",
    "SCREEN_SIZES",
    "SKINS",
    "Element",
    "Layout",
    "Screen",
    "encode_png",
    "palette_index",
    "render_indices",
    "render_screen",
    "restyle",
    "skin_palette",
]

#: ``(width, height)`` in pixels per platform
SCREEN_SIZES: dict[str, tuple[int, int]] = {"mobile": (540, 1170), "desktop": (1280, 800)}

Colour = tuple[int, int, int]
BACKGROUND: Colour = (246, 246, 248)
INK: Colour = (32, 33, 36)
MUTED: Colour = (110, 112, 120)
WHITE: Colour = (255, 255, 255)
HEADING: Colour = (90, 90, 90)
BUBBLE_IN: Colour = (230, 236, 230)
BUBBLE_OUT: Colour = (210, 230, 250)
HOME_ACCENT: Colour = (60, 70, 90)
#: shared themes: apps come in three visual families (a bar colour shared by several apps), so global
#: colour similarity to the current screen does not single out the app a remembered value came from
THEMES: dict[str, Colour] = {"warm": (200, 90, 50), "green": (40, 140, 90), "blue": (50, 100, 190)}
#: app name -> accent colour (its theme's)
ACCENTS: dict[str, Colour] = {
    "Shop": THEMES["warm"],
    "Messages": THEMES["green"],
    "Notes": THEMES["blue"],
    "Calendar": THEMES["warm"],
    "Settings": THEMES["green"],
    "Browser": THEMES["blue"],
    "Files": THEMES["warm"],
}
#: every colour the world draws with; screenshots are palette PNGs over this list (1 byte per pixel)
PALETTE: tuple[Colour, ...] = (
    BACKGROUND,
    INK,
    MUTED,
    WHITE,
    HEADING,
    BUBBLE_IN,
    BUBBLE_OUT,
    HOME_ACCENT,
    *THEMES.values(),
)
_INDEX = {c: i for i, c in enumerate(PALETTE)}
_PALETTE_ARRAY = np.array(PALETTE, dtype=np.uint8)
_PALETTE_BYTES = bytes(v for c in PALETTE for v in c)


def palette_index(colour: Colour) -> int:
    """Index of ``colour`` in :data:`PALETTE` (every drawn colour must be listed there)."""
    try:
        return _INDEX[tuple(colour)]  # type: ignore[index]
    except KeyError:
        raise ValueError(
            f"colour {colour!r} is not in the world's PALETTE; add it to render.PALETTE"
        ) from None


@dataclass(frozen=True, slots=True)
class Element:
    """One UI element.

    Attributes:
        kind: ``bar``, ``dock``, ``text``, ``button``, ``item``, ``field``, ``toggle`` or ``icon``.
        label: main text, drawn one cell in from the left edge of the box (vertically centred).
        box: ``(c0, r0, c1, r1)`` in cells, exclusive ends.
        bg: fill colour, or None for none.
        fg: ink colour.
        detail: secondary text drawn right-aligned on the label's row.
        action: what a click does (interpreted by the environment), None if not clickable.
    """

    kind: str
    label: str
    box: tuple[int, int, int, int]
    bg: Colour | None = None
    fg: Colour = INK
    detail: str = ""
    action: tuple[object, ...] | None = None

    def box_px(self) -> tuple[int, int, int, int]:
        c0, r0, c1, r1 = self.box
        return c0 * CELL_W, r0 * CELL_H, c1 * CELL_W, r1 * CELL_H

    def text_cells(self) -> tuple[int, int, int]:
        """``(first column, row, number of cells)`` where :func:`render_indices` draws the label."""
        c0, r0, c1, r1 = self.box
        boxed = self.kind != "text"
        inner = c0 + (1 if boxed else 0)
        limit = c1 - inner - (1 if boxed else 0)
        return inner, r0 + (r1 - r0 - 1) // 2, len(self.label[:limit].rstrip())

    def text_box_px(self) -> tuple[int, int, int, int]:
        """Pixel box of the drawn label (what OCR reports for it)."""
        col, row, n = self.text_cells()
        return col * CELL_W, row * CELL_H, (col + n) * CELL_W, (row + 1) * CELL_H


@dataclass(slots=True)
class Screen:
    """A rendered-to-be screen: its app (None = launcher), title and elements."""

    app: str | None
    title: str
    elements: list[Element] = field(default_factory=list)

    def texts(self) -> list[str]:
        return [t for e in self.elements for t in (e.label, e.detail) if t]

    def hit(self, px: int, py: int) -> Element | None:
        """The topmost clickable element whose box contains pixel ``(px, py)``."""
        for element in reversed(self.elements):
            x0, y0, x1, y1 = element.box_px()
            if element.action is not None and x0 <= px < x1 and y0 <= py < y1:
                return element
        return None


class Layout:
    """Stacks elements in a content column: phone uses the full width, desktop a centred column plus a
    dock of app buttons on the left."""

    def __init__(self, size: tuple[int, int], app: str | None, title: str, *, accent: Colour) -> None:
        self.cols, self.rows = size[0] // CELL_W, size[1] // CELL_H
        desktop = size[0] > size[1]
        width = min(self.cols - 4, 64)
        self.c0 = (self.cols - width) // 2 if desktop else 2
        self.c1 = self.c0 + width
        self.screen = Screen(app, title)
        self.accent = accent
        self.row = 0
        bar_label = app or "Home"
        self.add(Element("bar", bar_label, (0, 0, self.cols, 3), accent, WHITE, detail="09:41"))
        if desktop:
            for i, name in enumerate(ACCENTS):
                box = (1, 5 + 4 * i, 13, 8 + 4 * i)
                colour = ACCENTS[name] if name == app else HOME_ACCENT
                self.add(Element("dock", name, box, colour, WHITE, action=("app", name)))
        self.row = 4
        if title and title != bar_label:
            self.text(title, fg=INK)
            self.row += 1

    @property
    def full(self) -> bool:
        return self.row + 3 > self.rows

    def add(self, element: Element) -> Element:
        self.screen.elements.append(element)
        return element

    def text(self, line: str, *, fg: Colour = INK, bg: Colour | None = None) -> None:
        if self.full:
            return
        self.add(Element("text", line, (self.c0, self.row, self.c1, self.row + 1), bg, fg))
        self.row += 1

    def gap(self, n: int = 1) -> None:
        self.row += n

    def item(self, label: str, action: tuple[object, ...], *, detail: str = "", bg: Colour = WHITE) -> None:
        if self.full:
            return
        self.add(Element("item", label, (self.c0, self.row, self.c1, self.row + 3), bg, INK, detail, action))
        self.row += 4

    def button(self, label: str, action: tuple[object, ...], *, width: int | None = None) -> None:
        if self.full:
            return
        w = width or len(label) + 2
        self.add(
            Element(
                "button",
                label,
                (self.c0, self.row, self.c0 + w, self.row + 3),
                self.accent,
                WHITE,
                action=action,
            )
        )
        self.row += 4

    def buttons(self, labels: list[tuple[str, tuple[object, ...]]]) -> None:
        """A row of buttons separated by two blank cells."""
        if self.full:
            return
        col = self.c0
        for label, action in labels:
            w = len(label) + 2
            self.add(
                Element(
                    "button", label, (col, self.row, col + w, self.row + 3), self.accent, WHITE, action=action
                )
            )
            col += w + 2
        self.row += 4

    def field(self, placeholder: str, value: str, field_id: str) -> None:
        if self.full:
            return
        label = value or placeholder
        fg = INK if value else MUTED
        self.add(
            Element(
                "field",
                label,
                (self.c0, self.row, self.c1, self.row + 3),
                WHITE,
                fg,
                action=("focus", field_id),
            )
        )
        self.row += 4

    def toggle(self, label: str, on: bool, action: tuple[object, ...]) -> None:
        if self.full:
            return
        self.add(
            Element(
                "toggle",
                label,
                (self.c0, self.row, self.c1, self.row + 3),
                WHITE,
                INK,
                "On" if on else "Off",
                action,
            )
        )
        self.row += 4


def render_indices(screen: Screen, size: tuple[int, int]) -> np.ndarray:
    """Palette indices ``(H, W)`` uint8 of ``screen`` at ``size = (width, height)``."""
    width, height = size
    canvas = np.full((height, width), palette_index(BACKGROUND), dtype=np.uint8)
    for element in screen.elements:
        x0, y0, x1, y1 = element.box_px()
        if element.bg is not None:
            canvas[y0:y1, x0:x1] = palette_index(element.bg)
        inner, row, n = element.text_cells()
        if element.label:
            draw_text(canvas, inner, row, element.label[:n], palette_index(element.fg))
        c1 = element.box[2]
        if element.detail:
            ink = MUTED if element.kind == "item" else element.fg
            draw_text(canvas, c1 - 1 - len(element.detail), row, element.detail, palette_index(ink))
    return canvas


def render_screen(screen: Screen, size: tuple[int, int]) -> np.ndarray:
    """Pixels ``(H, W, 3)`` uint8 of ``screen`` at ``size = (width, height)``."""
    return _PALETTE_ARRAY[render_indices(screen, size)]


#: skins of the world family: replacement colours for palette entries (same indices, so OCR is unchanged)
SKINS: dict[str, dict[Colour, Colour]] = {
    "v2": {},
    "dusk": {
        BACKGROUND: (236, 234, 240),
        HOME_ACCENT: (40, 40, 60),
        THEMES["warm"]: (150, 60, 90),
        THEMES["green"]: (60, 110, 120),
        THEMES["blue"]: (90, 70, 160),
    },
    "mint": {
        HOME_ACCENT: (30, 90, 80),
        THEMES["warm"]: (220, 120, 60),
        THEMES["green"]: (20, 160, 140),
        THEMES["blue"]: (70, 130, 210),
    },
    "mono": {
        BACKGROUND: (250, 250, 250),
        HOME_ACCENT: (60, 60, 60),
        THEMES["warm"]: (90, 90, 90),
        THEMES["green"]: (70, 70, 70),
        THEMES["blue"]: (110, 110, 110),
    },
}


def skin_palette(skin: str) -> bytes:
    """The palette bytes of ``skin`` (:data:`SKINS`; ``v2`` = :data:`PALETTE`)."""
    if skin not in SKINS:
        raise ValueError(f"skin={skin!r} must be one of {', '.join(SKINS)}")
    return bytes(v for c in PALETTE for v in SKINS[skin].get(c, c))


def restyle(screen: Screen, layout: str, size: tuple[int, int]) -> Screen:
    """``screen`` in layout family ``layout``: ``list`` (v2, unchanged), ``inset`` (content two cells to the
    right), ``airy`` (content rows spread by 5/4 from the top of the content, one cell to the right;
    elements pushed past the bottom are dropped) or ``stretch`` (rows spread by 9/8, three cells to the
    right; ``devshift`` worlds only). The bar and the desktop dock stay where they are; every box stays on the
    cell grid, so the world's OCR stays exact."""
    if layout == "list":
        return screen
    if layout not in ("inset", "airy", "stretch"):
        raise ValueError(f"layout={layout!r} must be one of list, inset, airy, stretch")
    rows, cols = size[1] // CELL_H, size[0] // CELL_W
    shift = {"inset": 2, "airy": 1, "stretch": 3}[layout]
    spread = {"airy": (5, 4), "stretch": (9, 8)}.get(layout)
    out = Screen(screen.app, screen.title)
    for e in screen.elements:
        if e.kind in ("bar", "dock"):
            out.elements.append(e)
            continue
        c0, r0, c1, r1 = e.box
        if spread is not None and r0 >= 4:
            top = 4 + ((r0 - 4) * spread[0]) // spread[1]
            r0, r1 = top, top + (r1 - r0)
        if r1 > rows:
            continue
        out.elements.append(
            # a full-width row keeps its right edge on the screen (only ``stretch`` shifts that far)
            Element(
                e.kind, e.label, (c0 + shift, r0, min(c1 + shift, cols), r1), e.bg, e.fg, e.detail, e.action
            )
        )
    return out


def encode_png(indices: np.ndarray, palette: bytes | None = None) -> bytes:
    """Palette PNG bytes of ``indices`` (from :func:`render_indices`; fast, lossless, deterministic);
    ``palette`` = a skin's palette (:func:`skin_palette`), default :data:`PALETTE`."""
    from PIL import Image

    image = Image.fromarray(indices, "P")
    image.putpalette(palette or _PALETTE_BYTES)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()
