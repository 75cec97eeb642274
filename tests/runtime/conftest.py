"""Fixtures for runtime tests: tiny offline Qwen-VL model directories (built once per session), a
dict-backed screenshot archive and a trace factory."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest
from memory_archive import DictArchive

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.render import BoundPrompt, render_prompt
from causalcache_memory.trace import Trace


def screenshot(color: tuple[int, int, int], size: tuple[int, int] = (1280, 800)) -> bytes:
    """A PNG screenshot: a solid colour with a contrasting block, so different colours differ in pixels."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", size, color)
    ImageDraw.Draw(image).rectangle((100, 100, 600, 400), fill=(255 - color[0], color[2], color[1]))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


@pytest.fixture(scope="session")
def tiny_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    root = tmp_path_factory.mktemp("tiny-qwen")
    return {fam: build_tiny_qwen_vl(root / fam, family=fam) for fam in ("qwen2_5_vl", "qwen3_vl")}


@pytest.fixture(scope="session")
def tiny_dir(tiny_dirs: dict[str, Path]) -> Path:
    return tiny_dirs["qwen2_5_vl"]


@pytest.fixture(scope="session")
def policies(tiny_dirs: dict[str, Path]):
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    return {
        fam: TransformersPolicy.from_pretrained(path, max_new_tokens=8) for fam, path in tiny_dirs.items()
    }


@pytest.fixture(scope="session")
def policy(policies):
    return policies["qwen2_5_vl"]


@pytest.fixture(scope="session")
def episode() -> tuple[Trace, DictArchive]:
    """A 6-event desktop episode whose screenshots all differ."""
    archive = DictArchive()
    trace = Trace("Open the settings and enable dark mode", episode_id="ep-runtime")
    trace.observe(archive.put(screenshot((0, 0, 0))).sha256)
    for i in range(6):
        shot = archive.put(screenshot((30 * i + 20, 90, 200 - 25 * i))).sha256
        trace.record(
            Action("click", x=0.1 * i + 0.05, y=0.5), f"pyautogui.click(x={0.1 * i:.2f}, y=0.5)", shot
        )
    return trace, archive


@pytest.fixture(scope="session")
def make_prompt(episode) -> Callable[..., BoundPrompt]:
    """``make_prompt(selected, budget=None)``: the prompt for the next decision with history ``selected``."""
    trace, archive = episode

    def make(selected: tuple[int, ...], budget: int | None = None) -> BoundPrompt:
        alloc = make_allocation(
            selected, t=trace.t, budget=len(selected) if budget is None else budget, allocator="t"
        )
        return render_prompt(trace, alloc).bind(archive)

    return make
