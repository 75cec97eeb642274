"""docs/ARCHITECTURE.md stays true to the tree: every public module of the library is named on the page
(its file stem, as the layer diagram writes it; ``_private`` modules are their package's detail), and every module the page names exists."""

from __future__ import annotations

import re

from import_graph import REPO, module_files

PAGE = REPO / "docs" / "ARCHITECTURE.md"


def library_stems() -> set[str]:
    """Stems of the library's modules and packages (``controller``, ``trace``, ``store``, ...)."""
    out = set()
    for name in module_files():
        parts = name.split(".")
        if parts[0] != "causalcache_memory" or len(parts) == 1:
            continue
        out.add(parts[-1])
    return {s for s in out if not s.startswith("_")}  # private modules are their package's detail


def test_every_library_module_is_on_the_page() -> None:
    text = PAGE.read_text(encoding="utf-8")
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", text))
    missing = sorted(s for s in library_stems() if s not in words)
    assert missing == [], f"name these modules in docs/ARCHITECTURE.md: {missing}"


def test_the_page_names_no_module_file_that_is_gone() -> None:
    text = PAGE.read_text(encoding="utf-8")
    stems = {path.stem for path in module_files().values()}
    named = set(re.findall(r"\b([a-z_][a-z0-9_]*)\.py\b", text))
    named = {n for n in named if not n.startswith("test_")}  # tests are named by path, not stem
    assert sorted(named - stems - {"typecheck", "conftest"}) == []


def test_the_page_is_short() -> None:
    assert PAGE.read_text(encoding="utf-8").count("\n") <= 200  # a ten-minute read
