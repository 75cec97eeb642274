"""Fixtures every test of the repository gets, in the library's suite (``tests/``) and the lab's
(``lab/tests/``): deterministic seeds and tiny screenshots. Both suites' top-level ``conftest.py`` load it
as a pytest plugin."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    np.random.seed(0)


def png_bytes(
    color: tuple[int, int, int] = (10, 20, 30), size: tuple[int, int] = (64, 48), text: str = ""
) -> bytes:
    """A small PNG; different ``color``/``text`` give different bytes."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, color)
    if text:
        ImageDraw.Draw(image).text((2, 2), text, fill=(255, 255, 255))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture
def make_png():
    return png_bytes
