"""The synthetic world's bitmap font: 5x7 glyphs drawn at integer scale on a global cell grid.

Every glyph is a ``7 x 5`` bit mask (row-major, bit 4 = leftmost column), drawn at ``SCALE = 2`` as a
``14 x 10`` pixel block at offset ``(1, 1)`` inside a ``CELL_H x CELL_W = 16 x 12`` pixel cell, in one
pure ink colour and without antialiasing. Text is only ever drawn at cell-grid positions
(``x = 12 * col``, ``y = 16 * row``), so :mod:`causalcache_lab.world.ocr` can read any screenshot of
the world exactly by slicing it into cells. The glyph shapes are our own; only their distinctness
matters (checked by the tests).
"""

from __future__ import annotations

from functools import cache

import numpy as np

__all__ = [
    "CELL_H",
    "CELL_W",
    "CHARSET",
    "GLYPH_H",
    "GLYPH_W",
    "SCALE",
    "draw_text",
    "glyph_code",
    "glyph_rows",
]

GLYPH_W, GLYPH_H = 5, 7
SCALE = 2
CELL_W, CELL_H = 12, 16
_OFFSET = 1  # pixel offset of the glyph block inside its cell (the cell's corner pixel is always background)

# 7 rows of 5 bits per glyph, written as hex bytes.
_GLYPHS: dict[str, str] = {
    "A": "0E1111111F1111",
    "B": "1E11111E11111E",
    "C": "0E11101010110E",
    "D": "1C12111111121C",
    "E": "1F10101E10101F",
    "F": "1F10101E101010",
    "G": "0E11101711110F",
    "H": "1111111F111111",
    "I": "0E04040404040E",
    "J": "0702020202120C",
    "K": "11121418141211",
    "L": "1010101010101F",
    "M": "111B1515111111",
    "N": "11111915131111",
    "O": "0E11111111110E",
    "P": "1E11111E101010",
    "Q": "0E11111115120D",
    "R": "1E11111E141211",
    "S": "0F10100E01011E",
    "T": "1F040404040404",
    "U": "1111111111110E",
    "V": "11111111110A04",
    "W": "1111111515150A",
    "X": "11110A040A1111",
    "Y": "1111110A040404",
    "Z": "1F01020408101F",
    "a": "00000E010F110F",
    "b": "1010161911111E",
    "c": "00000E1010110E",
    "d": "01010D1311110F",
    "e": "00000E111F100E",
    "f": "0609081C080808",
    "g": "000F11110F010E",
    "h": "10101619111111",
    "i": "04000C0404040E",
    "j": "0200060202120C",
    "k": "10101214181412",
    "l": "0C04040404040E",
    "m": "00001A15151111",
    "n": "00001619111111",
    "o": "00000E1111110E",
    "p": "00001E111E1010",
    "q": "00000D130F0101",
    "r": "00001619101010",
    "s": "00000E100E011E",
    "t": "08081C08080906",
    "u": "0000111111130D",
    "v": "00001111110A04",
    "w": "0000111115150A",
    "x": "0000110A040A11",
    "y": "000011110F010E",
    "z": "00001F0204081F",
    "0": "0E11131519110E",
    "1": "040C040404040E",
    "2": "0E11010204081F",
    "3": "1F02040201110E",
    "4": "02060A121F0202",
    "5": "1F101E0101110E",
    "6": "0608101E11110E",
    "7": "1F010204080808",
    "8": "0E11110E11110E",
    "9": "0E11110F01020C",
    "#": "0A0A1F0A1F0A0A",
    ":": "000C0C000C0C00",
    "-": "0000001F000000",
    ".": "00000000000C0C",
    "/": "00010204081000",
    "@": "0E11010D15150E",
    ",": "000000000C0408",
    "(": "02040808080402",
    ")": "08040202020408",
    "'": "0C040800000000",
    "+": "0004041F040400",
    "$": "040F140E051E04",
    "!": "04040404040004",
    "?": "0E110102040004",
    "&": "0C12140815120D",
    "%": "18190204081303",
    "_": "0000000000001F",
    "=": "00001F001F0000",
    ">": "08040201020408",
    "<": "02040810080402",
    '"': "0A0A0A00000000",
    "*": "0004150E150400",
    ";": "000C0C000C0408",
}
#: every drawable character except the space
CHARSET: str = "".join(_GLYPHS)


def glyph_rows(char: str) -> tuple[int, ...]:
    """The 7 row bit patterns of ``char`` (bit 4 = leftmost column)."""
    hexes = _GLYPHS[char]
    return tuple(int(hexes[2 * i : 2 * i + 2], 16) for i in range(GLYPH_H))


@cache
def _glyph_mask(char: str) -> np.ndarray:
    """``(7, 5)`` bool mask of ``char``."""
    rows = glyph_rows(char)
    return np.array([[(r >> (GLYPH_W - 1 - c)) & 1 for c in range(GLYPH_W)] for r in rows], dtype=bool)


@cache
def _cell_mask(char: str) -> np.ndarray:
    """``(CELL_H, CELL_W)`` bool ink mask of ``char`` as drawn in its cell."""
    big = np.kron(_glyph_mask(char), np.ones((SCALE, SCALE), dtype=bool))
    cell = np.zeros((CELL_H, CELL_W), dtype=bool)
    cell[_OFFSET : _OFFSET + GLYPH_H * SCALE, _OFFSET : _OFFSET + GLYPH_W * SCALE] = big
    return cell


def glyph_code(char: str) -> int:
    """The 35-bit code of ``char``: its ``7 x 5`` mask read row-major, first pixel = bit 0."""
    flat = _glyph_mask(char).reshape(-1)
    return int(sum(1 << i for i, v in enumerate(flat) if v))


def draw_text(canvas: np.ndarray, col: int, row: int, text: str, ink: object) -> int:
    """Stamp ``text`` into ``canvas`` starting at grid cell ``(col, row)``.

    ``canvas`` is ``(H, W, 3)`` uint8 with an RGB ``ink``, or ``(H, W)`` palette indices with an integer ``ink``.

    Characters without a glyph are drawn as spaces; text running past the right edge is clipped at a
    cell boundary. Returns the number of cells used.
    """
    height, width = canvas.shape[:2]
    y0 = row * CELL_H
    if y0 < 0 or y0 + CELL_H > height:
        return 0
    colour = np.asarray(ink, dtype=np.uint8)
    for i, char in enumerate(text):
        x0 = (col + i) * CELL_W
        if x0 + CELL_W > width:
            return i
        if char in _GLYPHS:
            block = canvas[y0 : y0 + CELL_H, x0 : x0 + CELL_W]
            block[_cell_mask(char)] = colour
    return len(text)
