"""The LangGraph integration is wiring around one step session: no function in it over 40 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import causalcache_memory.integrations.langgraph as langgraph_integration

MAX_LINES = 40
PACKAGE = Path(langgraph_integration.__file__).parent


def long_functions(root: Path, limit: int) -> list[str]:
    """``file:line name (n lines)`` of every function or method in ``root`` longer than ``limit`` lines."""
    out = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                lines = node.end_lineno - start + 1  # type: ignore[operator]
                if lines > limit:
                    out.append(f"{path.name}:{node.lineno} {node.name} ({lines} lines)")
    return out


def test_no_function_in_the_langgraph_integration_is_over_40_lines() -> None:
    assert long_functions(PACKAGE, MAX_LINES) == []


def test_the_check_sees_a_long_function(tmp_path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_LINES))
    (tmp_path / "long.py").write_text(f"def too_long():\n{body}\n")
    (tmp_path / "short.py").write_text("def fine():\n    return 1\n")
    assert long_functions(tmp_path, MAX_LINES) == [f"long.py:1 too_long ({MAX_LINES + 1} lines)"]
