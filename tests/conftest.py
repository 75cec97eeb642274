"""Shared fixtures: deterministic seeds, tiny screenshots, a local archive."""

from __future__ import annotations

import io
import random

import numpy as np
import pytest

pytest_plugins = ["ci_services", "pytester"]  # services .ci/run starts must not skip under CI=true


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
