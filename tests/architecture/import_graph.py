"""The package's import graph, read from source with ``ast`` (function-level imports count too).

Module names follow ``pyproject.toml``'s ``package-dir``: ``integrations/`` is
``causalcache_memory.integrations`` and ``runtime/`` is ``causalcache_memory.runtime``; the lab
(``lab/causalcache_lab``, its own distribution) is ``causalcache_lab``. Imports inside an
``if TYPE_CHECKING:`` block are type-only and do not count. ``from pkg import name`` counts as an import of
``pkg.name`` when that is a module, else of ``pkg``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = {
    "causalcache_memory": REPO / "causalcache_memory",
    "causalcache_memory.integrations": REPO / "integrations",
    "causalcache_memory.runtime": REPO / "runtime",
    "causalcache_lab": REPO / "lab" / "causalcache_lab",
}


def module_files() -> dict[str, Path]:
    """Every module of the library and the lab: dotted name -> file."""
    out: dict[str, Path] = {}
    for base, root in ROOTS.items():
        for path in sorted(root.rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([base, *parts])
            if base == "causalcache_memory" and parts and parts[0] in ("integrations", "runtime"):
                continue
            out[name] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(tree: ast.AST) -> Iterator[ast.AST]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            yield from (n for child in node.orelse for n in [child, *_walk(child)])
            continue
        yield node
        yield from _walk(node)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Dotted names ``name`` imports (absolute or relative, at any depth, outside TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.add(sub if sub in modules else target)
    return found


#: a string that is a module path, optionally with ``:attribute`` (importlib / entry-point style)
IMPORT_PATH = re.compile(r"^causalcache_(memory|lab)(\.[A-Za-z_]\w*)*(:[A-Za-z_]\w*)?$")


def _docstrings(tree: ast.AST) -> set[int]:
    """``id`` of every module/class/function docstring node (prose, not import paths)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def import_strings_of(path: Path, modules: dict[str, Path]) -> set[str]:
    """Package modules named by string constants that are import paths (``"pkg.mod"``, ``"pkg.mod:attr"``),
    outside docstrings and TYPE_CHECKING blocks: what ``importlib.import_module`` or a registry of
    ``"module:function"`` entries would import at run time, invisible to ``imports_of``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    docs = _docstrings(tree)
    found: set[str] = set()
    for node in _walk(tree):
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)) or id(node) in docs:
            continue
        if not IMPORT_PATH.match(node.value):
            continue
        dotted = node.value.partition(":")[0]
        while dotted and dotted not in modules:  # "pkg.mod.attr" -> the module that defines it
            dotted = dotted.rpartition(".")[0]
        if dotted:
            found.add(dotted)
    return found


def graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = module_files()
    return {
        name: {m for m in imports_of(name, path, modules) if m in modules and m != name}
        for name, path in modules.items()
    }


def cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(g.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out
