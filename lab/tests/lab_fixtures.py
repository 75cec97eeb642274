"""The library's per-folder test fixtures, for the lab's test folders of the same name."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

LIBRARY_TESTS = Path(__file__).resolve().parents[2] / "tests"

__all__ = ["library_fixtures"]


def library_fixtures(folder: str) -> dict[str, Any]:
    """The fixtures of ``tests/<folder>/conftest.py`` (loaded by path under a private module name), to be
    bound in a lab folder's ``conftest.py`` with ``globals().update(library_fixtures("core"))``."""
    path = LIBRARY_TESTS / folder / "conftest.py"
    spec = importlib.util.spec_from_file_location(f"_library_conftest_{folder}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: value for name, value in vars(module).items() if hasattr(value, "_fixture_function_marker")}
