"""Benchmark screenshots: realistic PNGs, unique variants with identical pixels and no re-encode."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from causalcache_lab.bench.screens import make_screenshot, unique_variant


def test_unique_variant_changes_bytes_not_pixels() -> None:
    png = make_screenshot(1, (320, 180))
    a, b = unique_variant(png, 1), unique_variant(png, 2)
    assert len({png, a, b}) == 3 and len(a) == len(png) + 20
    pixels = [np.asarray(Image.open(io.BytesIO(x)).convert("RGB")) for x in (png, a, b)]
    assert all(np.array_equal(pixels[0], p) for p in pixels[1:])
    from causalcache_memory.archive.images import validate_image_bytes

    assert validate_image_bytes(a).width == 320


def test_unique_variant_rejects_non_png() -> None:
    with pytest.raises(ValueError, match="PNG"):
        unique_variant(b"\xff\xd8\xff\xe0 not a png", 1)


def test_screenshot_is_screen_like_not_noise() -> None:
    png = make_screenshot(0, (640, 360))
    raw = 640 * 360 * 3
    assert png.startswith(b"\x89PNG") and len(png) < raw / 3  # compresses like a UI, unlike noise
    assert make_screenshot(0, (640, 360)) == png  # deterministic
    assert make_screenshot(1, (640, 360)) != png
