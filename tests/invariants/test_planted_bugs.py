"""The planted-bug tables of issues 19 and 52 (tools/plant_bugs.py) stay applicable to today's code.

The fast test checks that every plant still matches exactly once (a refactor that moves the guarded line
must update the table, not silently drop the bug). The slow test plants every bug in a temporary copy
of the tree and checks that its tests fail there and pass on the unplanted copy.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        spec = importlib.util.spec_from_file_location("plant_bugs", ROOT / "tools" / "plant_bugs.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_every_plant_applies_exactly_once_and_names_existing_tests() -> None:
    tool = load_tool()
    assert len(tool.PLANTS) == 14 and len({p.name for p in tool.PLANTS}) == 14  # issue 19's 7, issue 52's 7
    assert all(p.min_failed == 2 for p in tool.ISSUE52) and all(p.min_failed == 1 for p in tool.ISSUE19)
    for plant in tool.PLANTS:
        original = (ROOT / plant.path).read_text(encoding="utf-8")
        changed = tool.planted(plant, ROOT)  # raises SystemExit unless exactly one match
        assert changed != original
        for test in plant.tests:
            assert (ROOT / test).is_file(), test


@pytest.mark.slow
def test_every_planted_bug_is_caught(capsys) -> None:
    tool = load_tool()
    assert tool.main([]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert out.count("caught") == 14 and "MISSED" not in out
