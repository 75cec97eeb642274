"""Small modules with one job each: no module of the package is over 600 lines.

A smoke alarm, not a shape: modules are split where their jobs split (issue 53), and this only catches a
module that has grown several jobs. It was 400 until issue 53 found files cut at exactly 400 lines."""

from __future__ import annotations

from import_graph import module_files

MAX_LINES = 600


def oversized(limit: int = MAX_LINES) -> dict[str, int]:
    out = {}
    for name, path in module_files().items():
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > limit:
            out[name] = lines
    return out


def test_no_module_over_the_limit() -> None:
    assert oversized() == {}


def test_the_check_reports_a_long_module() -> None:
    # the largest module is always over a limit of 1 line: the check does read the files
    assert oversized(limit=1)
