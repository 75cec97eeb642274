"""The Python snippets of the docs: extraction, the no-run marker, a static check of library calls, and
running a document's snippets in order in one namespace (shared by tests/test_docs.py and
tests/reliability).

A snippet is a fenced ```` ```python ```` block. It runs unless the line right before its fence is the
marker ``<!-- snippet: no-run REASON -->`` (docs/TESTING.md, "Doc snippets"). Every snippet, runnable or
not, is compiled, its ``causalcache_memory`` imports are resolved, and every call of an imported name
(``f(...)``, ``Cls(...)``, ``Cls.method(...)``) is bound to the callable's signature, so a renamed
keyword (an allocator passed under a removed keyword name) fails here even in a snippet that cannot run.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
_FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.S | re.M)
_NO_RUN = re.compile(r"^<!--\s*snippet:\s*no-run\b\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Snippet:
    """One fenced Python block of a document."""

    doc: Path
    line: int  # 1-based line of the opening fence
    code: str
    no_run: str | None  # the reason given by the no-run marker, None if the snippet runs

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def snippets(doc: Path) -> list[Snippet]:
    text = doc.read_text(encoding="utf-8")
    out = []
    for match in _FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip()
        marker = _NO_RUN.match(before)
        line = text.count("\n", 0, match.start()) + 1
        out.append(
            Snippet(doc, line, match.group(1), (marker.group(1) or "no reason given") if marker else None)
        )
    return out


def _imports(tree: ast.Module, snippet: Snippet) -> dict[str, Any]:
    """The names a snippet imports from causalcache_memory (a missing optional dependency is skipped)."""
    namespace: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            continue
        if not any(m.split(".")[0] == "causalcache_memory" for m in modules):
            continue
        try:
            exec(compile(ast.Module([node], []), snippet.id, "exec"), namespace)
        except ModuleNotFoundError as exc:
            if (exc.name or "").startswith("causalcache_memory"):
                raise
    return namespace


def _resolve(func: ast.expr, namespace: dict[str, Any]) -> Any:
    if isinstance(func, ast.Name):
        return namespace.get(func.id)
    if isinstance(func, ast.Attribute):
        owner = _resolve(func.value, namespace)
        return getattr(owner, func.attr, None) if owner is not None else None
    return None


def call_problems(snippet: Snippet) -> list[str]:
    """Calls of imported library names whose arguments do not bind to the signature."""
    tree = ast.parse(snippet.code, filename=snippet.id)
    namespace = _imports(tree, snippet)
    problems = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        target = _resolve(node.func, namespace)
        if not callable(target) or any(isinstance(a, ast.Starred) for a in node.args):
            continue
        if any(k.arg is None for k in node.keywords):  # **kwargs: cannot be checked statically
            continue
        try:
            signature = inspect.signature(target)
        except (TypeError, ValueError):
            continue
        try:
            signature.bind(*([None] * len(node.args)), **{k.arg: None for k in node.keywords if k.arg})
        except TypeError as exc:
            line = snippet.line + node.lineno
            problems.append(f"{snippet.doc.relative_to(ROOT)}:{line}: {ast.unparse(node.func)}(...): {exc}")
    return problems


def run_in_order(blocks: list[Snippet], workdir: Path) -> dict[str, Any]:
    """Execute runnable ``blocks`` in order in one namespace, in ``workdir``; the namespace afterwards."""
    namespace: dict[str, Any] = {"__name__": "doc_snippet"}
    with contextlib.chdir(workdir):
        for block in blocks:
            assert block.no_run is None, block.id
            try:
                exec(compile(block.code, block.id, "exec"), namespace)
            except Exception as exc:
                raise AssertionError(f"{block.id} failed: {type(exc).__name__}: {exc}\n{block.code}") from exc
    return namespace
