"""The library never imports the lab (issue 53's boundary).

The lab (``causalcache_lab``, its own distribution under ``lab/``) imports the library; no module of
``causalcache_memory`` (core, ``cli``, ``integrations``, ``runtime``) names it: not by ``import``, not
lazily inside a function, not by an import-path string (``importlib.import_module("causalcache_lab.x")``,
a ``"causalcache_lab.x:f"`` registry entry). The lab reaches the library through entry points
(``lab/pyproject.toml``), which this test does not need to see.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from import_graph import REPO, _docstrings, _walk, imports_of, module_files


def library_modules() -> dict[str, Path]:
    return {n: p for n, p in module_files().items() if n.split(".")[0] == "causalcache_memory"}


def lab_names(path: Path, name: str, modules: dict[str, Path]) -> list[str]:
    """Every way ``path`` names the lab: imports (any depth) and non-docstring strings starting with it."""
    found = sorted(t for t in imports_of(name, path, modules) if t.split(".")[0] == "causalcache_lab")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = _docstrings(tree)
    for node in _walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            text = node.value.strip()
            if text.startswith("causalcache_lab") and " " not in text:
                found.append(repr(node.value))
    return found


def boundary_violations(modules: dict[str, Path]) -> list[str]:
    return [
        f"{name} -> {target}"
        for name, path in sorted(modules.items())
        if name.split(".")[0] == "causalcache_memory"
        for target in lab_names(path, name, modules)
    ]


def test_no_library_module_names_the_lab() -> None:
    modules = module_files()
    assert len(library_modules()) > 100  # the whole library is scanned (core, cli, integrations, runtime)
    assert boundary_violations(modules) == []


def test_the_boundary_check_catches_every_way_of_naming_the_lab(tmp_path) -> None:
    probes = {
        "top": "import causalcache_lab\n",
        "lazy": "def f():\n    from causalcache_lab.world import generate_tasks\n",
        "string": 'import importlib\nM = importlib.import_module("causalcache_lab.world.sim_policy")\n',
        "entry": 'ENTRY = "causalcache_lab.runtimes:simulated"\n',
        "prose": '"""Docstrings may name causalcache_lab freely."""\nX = "see the causalcache_lab docs"\n',
    }
    modules = module_files()
    for stem, text in probes.items():
        path = tmp_path / f"{stem}.py"
        path.write_text(text, encoding="utf-8")
        modules[f"causalcache_memory.probe_{stem}"] = path
    found = boundary_violations(modules)
    assert [v.split(" -> ")[0] for v in found] == [
        "causalcache_memory.probe_entry",
        "causalcache_memory.probe_lazy",
        "causalcache_memory.probe_string",
        "causalcache_memory.probe_top",
    ]


def test_the_lab_lives_outside_the_library_namespace() -> None:
    assert not (REPO / "causalcache_memory" / "lab").exists()
    assert (REPO / "lab" / "causalcache_lab" / "__init__.py").is_file()
    assert (REPO / "lab" / "pyproject.toml").is_file()


def test_the_agent_example_runs_with_the_lab_unimportable(tmp_path) -> None:
    """The README's "use it in your agent" path (examples/langgraph_agent_causalcache.py) needs no lab: run
    it in a fresh interpreter in which ``import causalcache_lab`` fails, as after a library-only install."""
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text(
        "import importlib.abc, sys\n"
        "class _NoLab(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'causalcache_lab' or name.startswith('causalcache_lab.'):\n"
        "            raise ImportError('the lab is not installed (library-only install)')\n"
        "        return None\n"
        "sys.meta_path.insert(0, _NoLab())\n",
        encoding="utf-8",
    )
    example = REPO / "examples" / "langgraph_agent_causalcache.py"
    env = {"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "causalcache_lab" not in done.stderr
