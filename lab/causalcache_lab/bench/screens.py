"""Screenshot-like benchmark images: UI blocks and text, encoded once, made unique without re-encoding.

Random noise would make PNG sizes and decode times unrealistic (noise does not compress; screens do), so
:func:`make_screenshot` draws a desktop-like frame: a title bar, a sidebar of menu entries, a toolbar,
cards of text lines, a table and a few image tiles with gradients. A 1920x1080 frame encodes to roughly
0.3-1 MB of PNG, like real desktop captures.

Each agent step must archive *new* bytes (a real screen is never bit-identical to an earlier one), but
encoding hundreds of 1080p PNGs would dominate the benchmark's own run time. :func:`unique_variant`
therefore inserts a private ancillary ``ccBn`` chunk carrying a counter right after ``IHDR``: the result
is a different, valid PNG (decoders skip unknown ancillary chunks) with the same pixels, produced in
microseconds and never re-encoded.
"""

from __future__ import annotations

import io
import random
import struct
import zlib
from functools import lru_cache
from typing import Any

__all__ = ["make_screenshot", "screenshot_pool", "unique_variant"]

_PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
_WORDS = (
    "invoice order settings account profile search results download upload share folder project "
    "report meeting calendar message inbox draft archive status pending shipped delivered total "
    "amount date name email address phone notes task review approve cancel submit save open close"
).split()


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).capitalize()


def make_screenshot(seed: int = 0, size: tuple[int, int] = (1920, 1080)) -> bytes:
    """A deterministic PNG of a desktop-like screen (``size`` = ``(width, height)``).

    Sizes below 1280x720 are drawn at 1920x1080 and downscaled (the layout needs the room).
    """
    from PIL import Image

    w, h = size
    draw_size = size if w >= 1280 and h >= 720 else (1920, 1080)
    image = _draw(seed, draw_size)
    if draw_size != size:
        image = image.resize(size, Image.Resampling.BOX)
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=6)
    return buf.getvalue()


def _draw(seed: int, size: tuple[int, int]) -> Any:
    import numpy as np
    from PIL import Image, ImageDraw

    rng = random.Random(seed)
    w, h = size
    accent = (rng.randrange(40, 200), rng.randrange(40, 200), rng.randrange(80, 230))
    image = Image.new("RGB", size, (246, 247, 249))
    draw = ImageDraw.Draw(image)
    draw.rectangle((0, 0, w, 40), fill=accent)
    draw.text((16, 12), _sentence(rng, 4), fill=(255, 255, 255))
    side = w // 8
    draw.rectangle((0, 40, side, h), fill=(232, 234, 238))
    for i, y in enumerate(range(60, h - 30, 34)):
        if i == rng.randrange(8):
            draw.rectangle((0, y - 6, side, y + 20), fill=(210, 220, 240))
        draw.text((20, y), _sentence(rng, 2), fill=(40, 40, 50))
    draw.rectangle((side, 40, w, 90), fill=(255, 255, 255))
    for x in range(side + 16, w - 140, 130):
        draw.rounded_rectangle((x, 52, x + 118, 80), radius=6, outline=(190, 190, 200), fill=(250, 250, 252))
        draw.text((x + 10, 60), rng.choice(_WORDS), fill=(30, 30, 40))
    col_w = (w - side - 48) // 3
    for c in range(3):
        x0 = side + 16 + c * (col_w + 8)
        y = 104
        while y < h - 200:
            card_h = rng.randrange(120, 260)
            draw.rounded_rectangle(
                (x0, y, x0 + col_w, y + card_h), radius=8, fill=(255, 255, 255), outline=(220, 222, 228)
            )
            draw.text((x0 + 12, y + 10), _sentence(rng, 3), fill=accent)
            for ly in range(y + 32, y + card_h - 14, 16):
                draw.text((x0 + 12, ly), _sentence(rng, rng.randrange(4, 11)), fill=(60, 60, 70))
            y += card_h + 12
    # a table and gradient "photo" tiles: the incompressible part of real screens
    ty = h - 190
    for r in range(8):
        fill = (255, 255, 255) if r % 2 else (240, 242, 246)
        draw.rectangle((side + 16, ty + r * 22, w - 16, ty + (r + 1) * 22), fill=fill)
        for c, x in enumerate(range(side + 24, w - 200, 220)):
            draw.text(
                (x, ty + r * 22 + 5),
                f"{rng.choice(_WORDS)} {rng.randrange(10 ** (c % 5 + 1))}",
                fill=(50, 50, 60),
            )
    pixels = np.asarray(image).copy()
    nrng = np.random.default_rng(seed)
    for _ in range(4):
        tw, th = 220, 140
        x0, y0 = rng.randrange(side, w - tw), rng.randrange(100, h - 200 - th)
        yy, xx = np.mgrid[0:th, 0:tw]
        base = np.stack([(xx * 255 // tw), (yy * 255 // th), ((xx + yy) * 127 // (tw + th))], -1)
        tile = base + nrng.integers(-12, 13, size=base.shape)
        pixels[y0 : y0 + th, x0 : x0 + tw] = np.clip(tile, 0, 255).astype(np.uint8)
    return Image.fromarray(pixels)


@lru_cache(maxsize=4)
def screenshot_pool(count: int = 8, size: tuple[int, int] = (1920, 1080)) -> tuple[bytes, ...]:
    """``count`` distinct screenshots (encoded once per process)."""
    return tuple(make_screenshot(seed, size) for seed in range(count))


def unique_variant(png: bytes, counter: int) -> bytes:
    """``png`` with a ``ccBn`` ancillary chunk holding ``counter`` after ``IHDR``: new bytes, same pixels."""
    if not png.startswith(_PNG_MAGIC) or png[12:16] != b"IHDR":
        raise ValueError("unique_variant needs PNG bytes whose first chunk is IHDR")
    end_ihdr = 8 + 8 + 13 + 4  # magic + (length, type) + IHDR data + crc
    body = b"ccBn" + struct.pack(">Q", counter)
    chunk = struct.pack(">I", 8) + body + struct.pack(">I", zlib.crc32(body) & 0xFFFFFFFF)
    return png[:end_ihdr] + chunk + png[end_ihdr:]
