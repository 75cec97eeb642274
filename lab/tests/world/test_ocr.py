from __future__ import annotations

import random

import numpy as np
import pytest

from causalcache_lab.world import GuiWorld, generate_tasks, ocr_array, ocr_png
from causalcache_lab.world.font import CELL_H, CELL_W, CHARSET, draw_text, glyph_code
from causalcache_lab.world.render import PALETTE


def test_glyph_codes_are_distinct():
    codes = [glyph_code(c) for c in CHARSET]
    assert len(set(codes)) == len(CHARSET)
    assert 0 not in codes


def _random_word(rng: random.Random) -> str:
    return "".join(rng.choice(CHARSET) for _ in range(rng.randint(1, 8)))


@pytest.mark.parametrize("palette", [False, True])
def test_random_strings_on_varied_backgrounds_are_recovered_exactly(palette):
    rng = random.Random(7)
    width, height = 1280, 800
    cols, rows = width // CELL_W, height // CELL_H
    n = len(PALETTE)
    canvas = np.zeros((height, width), np.uint8) if palette else np.zeros((height, width, 3), np.uint8)
    expected: list[tuple[int, int, str]] = []
    for row in range(0, rows, 2):
        bg = rng.randrange(n)
        ink = (bg + rng.randrange(1, n)) % n
        if palette:
            canvas[row * CELL_H : (row + 1) * CELL_H] = bg
        else:
            canvas[row * CELL_H : (row + 1) * CELL_H] = (rng.randrange(256), bg * 7, rng.randrange(256))
        col = rng.randrange(0, 5)
        while True:
            text = " ".join(_random_word(rng) for _ in range(rng.randint(1, 3)))
            if col + len(text) > cols:
                break
            colour = (
                ink if palette else (rng.randrange(256), ink * 7 + 1 if ink * 7 + 1 != bg * 7 else 255, 0)
            )
            draw_text(canvas, col, row, text, colour)
            expected.append((col, row, text))
            col += len(text) + rng.randint(2, 4)
    result = ocr_array(canvas)
    got = [(line.box_px[0] // CELL_W, line.box_px[1] // CELL_H, line.text) for line in result.lines]
    assert got == expected


def test_boxes_are_relative_and_pixel_exact():
    canvas = np.full((160, 240, 3), 240, np.uint8)
    draw_text(canvas, 3, 2, "Order #123456", (10, 20, 30))
    (line,) = ocr_array(canvas).lines
    assert line.text == "Order #123456"
    assert line.box_px == (36, 32, 36 + 13 * CELL_W, 48)
    assert line.box_rel == pytest.approx((36 / 240, 32 / 160, (36 + 156) / 240, 48 / 160))


def test_unknown_ink_breaks_lines():
    canvas = np.full((32, 240, 3), 240, np.uint8)
    draw_text(canvas, 0, 0, "abc", (0, 0, 0))
    canvas[2:5, 4 * CELL_W + 3 : 4 * CELL_W + 4] = 0  # a stray mark one cell after "abc"
    draw_text(canvas, 5, 0, "xyz", (0, 0, 0))
    assert [line.text for line in ocr_array(canvas).lines] == ["abc", "xyz"]


def test_screenshot_png_reads_back_the_screen_texts():
    task = generate_tasks(2, seed=0, platform="desktop")[0]
    world = GuiWorld(task)
    texts = {line.text for line in ocr_png(world.screenshot()).lines}
    for element in world.screen().elements:
        assert element.label in texts
    assert ocr_png(world.screenshot()).lines == ocr_array(world.pixels()).lines
