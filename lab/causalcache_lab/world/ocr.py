"""Exact OCR for screenshots of the synthetic world.

The world draws text only with :mod:`causalcache_lab.world.font` at cell-grid positions, so reading a
screenshot needs no learning: the image is cropped to whole ``16 x 12`` cells and reshaped (a view, no
copy) to cells; a cell's background is its corner pixel (glyphs never touch it) and its ink is every
pixel differing from that background. The ink mask sampled at the glyph grid gives a 35-bit code, looked
up in the font's code table (vectorized ``searchsorted``); a cell whose 2x2 pixel blocks are not uniform
or whose code is not a glyph (icons, borders, photos) is *unknown* and breaks words like a gap.

Recognized characters are joined into :class:`OcrLine` runs along each cell row: a single blank cell is a
space inside a line, two or more blank cells (or an unknown cell) end it. Boxes are given in pixels
``(x0, y0, x1, y1)`` (exclusive ends) and relative to the image size.

Cost: about a millisecond for a phone screenshot, a few for a desktop one. :class:`OcrCache` keeps results
per screenshot content hash (LRU).
"""

from __future__ import annotations

import io
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from causalcache_lab.world.font import CELL_H, CELL_W, CHARSET, GLYPH_H, GLYPH_W, glyph_code

__all__ = ["OcrCache", "OcrLine", "OcrResult", "ocr_array", "ocr_image", "ocr_png"]

_CODES = np.array([glyph_code(c) for c in CHARSET], dtype=np.int64)
_ORDER = np.argsort(_CODES)
_SORTED_CODES = _CODES[_ORDER]
_SORTED_CHARS = np.array(list(CHARSET))[_ORDER]


@dataclass(frozen=True, slots=True)
class OcrLine:
    """One run of text on a cell row.

    Attributes:
        text: the characters, single spaces between words.
        box_px: ``(x0, y0, x1, y1)`` in pixels, exclusive ends.
        box_rel: the same box relative to the image size, in ``[0, 1]``.
    """

    text: str
    box_px: tuple[int, int, int, int]
    box_rel: tuple[float, float, float, float]

    @property
    def center_rel(self) -> tuple[float, float]:
        x0, y0, x1, y1 = self.box_rel
        return (x0 + x1) / 2, (y0 + y1) / 2


@dataclass(frozen=True, slots=True)
class OcrResult:
    """All text lines of one screenshot, top to bottom, left to right."""

    lines: tuple[OcrLine, ...]
    size: tuple[int, int]

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)

    def find(self, label: str) -> OcrLine | None:
        """The first line equal to ``label`` (else the first starting with it), or None."""
        for line in self.lines:
            if line.text == label:
                return line
        for line in self.lines:
            if line.text.startswith(label):
                return line
        return None

    def search(self, pattern: re.Pattern[str]) -> Iterator[re.Match[str]]:
        """Every match of ``pattern`` in every line, in reading order."""
        for line in self.lines:
            yield from pattern.finditer(line.text)


def _decode_cells(pixels: np.ndarray) -> np.ndarray:
    """``(rows, cols)`` array of characters: a glyph, ``" "`` (blank) or ``""`` (unknown ink).

    Works on palette indices (``(H, W)``) or on the green channel of RGB (the world's palette keeps ink and
    background apart there). Each cell is
    viewed as ``8 x 2`` row pairs by ``6 x 2`` column pairs: sample A is the pixel ``(2i+1, 2j+1)`` of glyph
    pixel ``(i, j)``, sample B its diagonal partner ``(2i+2, 2j+2)``; a glyph cell has ``A == B`` everywhere.
    """
    height, width = pixels.shape[:2]
    rows, cols = height // CELL_H, width // CELL_W
    plane = pixels if pixels.ndim == 2 else pixels[..., 1]
    green = plane[: rows * CELL_H, : cols * CELL_W].reshape(rows, CELL_H // 2, 2, cols, CELL_W // 2, 2)
    corner = green[:, 0, 0, :, 0, 0][:, None, :, None]
    a = green[:, 0:GLYPH_H, 1, :, 0:GLYPH_W, 1]
    b = green[:, 1 : GLYPH_H + 1, 0, :, 1 : GLYPH_W + 1, 0]
    ink = (a != corner).transpose(0, 2, 1, 3).reshape(rows, cols, GLYPH_H * GLYPH_W)
    consistent = (a == b).all(axis=(1, 3))
    packed = np.zeros((rows, cols, 8), dtype=np.uint8)
    packed[..., :5] = np.packbits(ink, axis=-1, bitorder="little")
    codes = packed.view(np.int64)[..., 0]
    pos = np.clip(np.searchsorted(_SORTED_CODES, codes), 0, len(_SORTED_CODES) - 1)
    known = (_SORTED_CODES[pos] == codes) & consistent
    chars = np.where(known, _SORTED_CHARS[pos], "")
    return np.where(codes == 0, " ", chars)


_RUN = re.compile(r"[^ \x00](?: ?[^ \x00])*")


def ocr_array(pixels: np.ndarray) -> OcrResult:
    """Read every text line of a screenshot of the world: ``(H, W, 3)`` RGB or ``(H, W)`` palette indices."""
    height, width = pixels.shape[:2]
    grid = _decode_cells(pixels)
    lines: list[OcrLine] = []
    for r in np.flatnonzero((grid != " ").any(axis=1)).tolist():
        row = "".join(ch or "\x00" for ch in grid[r].tolist())
        y0, y1 = r * CELL_H, (r + 1) * CELL_H
        for match in _RUN.finditer(row):
            x0, x1 = match.start() * CELL_W, match.end() * CELL_W
            rel = (x0 / width, y0 / height, x1 / width, y1 / height)
            lines.append(OcrLine(match.group(), (x0, y0, x1, y1), rel))
    return OcrResult(tuple(lines), (width, height))


def ocr_image(image: object) -> OcrResult:
    """Read a PIL image (palette images are read on their indices, without conversion)."""
    mode = image.mode  # type: ignore[attr-defined]
    if mode in ("P", "L"):
        return ocr_array(np.asarray(image))
    return ocr_array(np.asarray(image.convert("RGB")))  # type: ignore[attr-defined]


def ocr_png(data: bytes) -> OcrResult:
    """Read encoded image bytes (PNG)."""
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        return ocr_image(image)


class OcrCache:
    """LRU cache of OCR results keyed by screenshot content hash."""

    def __init__(self, maxsize: int = 4096) -> None:
        self.maxsize = int(maxsize)
        self._items: OrderedDict[str, OcrResult] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: str, load: object) -> OcrResult:
        """The cached result for ``key``; else ``load()`` (returning PNG bytes or a PIL image) is read."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            self.hits += 1
            return found
        self.misses += 1
        value = load()  # type: ignore[operator]
        result = ocr_png(value) if isinstance(value, (bytes, bytearray)) else ocr_image(value)
        self._items[key] = result
        if len(self._items) > self.maxsize:
            self._items.popitem(last=False)
        return result
