"""Shared fixtures: deterministic seeds, tiny screenshots, a local archive."""

from __future__ import annotations

import glob
import io
import os
import random

import numpy as np
import pytest

# The fused HGKV kernel's CPU tests run it under Triton's interpreter, which is most robust when chosen
# before triton is first imported (tests/kernel_modes.py also sets it per test). Machines with a GPU keep
# compiled Triton for the CUDA-marked tests.
if "TRITON_INTERPRET" not in os.environ and not glob.glob("/dev/nvidia[0-9]*"):
    os.environ["TRITON_INTERPRET"] = "1"
# services .ci/run starts must not skip under CI=true; no process a test starts outlives the session
pytest_plugins = ["ci_services", "process_sweep", "pytester"]


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
