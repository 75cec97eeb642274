"""The library's per-folder test fixtures, for the lab's test folders of the same name; the lab's tools
as modules."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

LIBRARY_TESTS = Path(__file__).resolve().parents[2] / "tests"
LAB_TOOLS = Path(__file__).resolve().parents[1] / "tools"

__all__ = ["lab_tool", "library_fixtures"]


def library_fixtures(folder: str) -> dict[str, Any]:
    """The fixtures of ``tests/<folder>/conftest.py`` (loaded by path under a private module name), to be
    bound in a lab folder's ``conftest.py`` with ``globals().update(library_fixtures("core"))``."""
    path = LIBRARY_TESTS / folder / "conftest.py"
    spec = importlib.util.spec_from_file_location(f"_library_conftest_{folder}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: value for name, value in vars(module).items() if hasattr(value, "_fixture_function_marker")}


@contextlib.contextmanager
def lab_tool(stem: str) -> Iterator[ModuleType]:
    """``lab/tools/<stem>.py`` as a module, with ``lab/tools`` on ``sys.path`` while it is in use (a
    tool imports its sibling tools when it runs, not only when it loads)."""
    sys.path.insert(0, str(LAB_TOOLS))
    try:
        spec = importlib.util.spec_from_file_location(f"{stem}_under_test", LAB_TOOLS / f"{stem}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(LAB_TOOLS))
