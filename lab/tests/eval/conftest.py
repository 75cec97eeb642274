"""Shared fixtures of the evaluation tests: the lab's ``lab/tools/`` scripts, loaded as modules."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

TOOLS = Path(__file__).resolve().parents[2] / "tools"


@pytest.fixture(scope="session")
def load_tool() -> Callable[[str], ModuleType]:
    """``load_tool("paired_contrast")``: ``lab/tools/paired_contrast.py`` as a module (not on ``sys.path``)."""

    def load(stem: str) -> ModuleType:
        spec = importlib.util.spec_from_file_location(f"{stem}_tool", TOOLS / f"{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    return load
