"""The tree's layering, read from source (AST; lazy imports inside functions count too).

Rule (docs/ARCHITECTURE.md, "Which layer may import which"):

* the run-time core (everything under ``causalcache_memory`` except ``cli``, ``integrations`` and
  ``runtime``) imports only the core;
* ``runtime`` imports the core and itself; ``integrations`` the core, ``runtime`` and itself; ``cli`` (the
  library's commands) anything of the library;
* the lab (``causalcache_lab``: training, evaluation, benchmarks, the synthetic world, its commands) may
  import anything; nothing of the library imports it (``test_lab_boundary.py``).

Import-path strings (``importlib.import_module("causalcache_memory.x")``, registry entries such as
``"causalcache_lab.world.sim_policy:policy_from_config"``) follow the same rule.
"""

from __future__ import annotations

from pathlib import Path

from import_graph import cycles, graph, import_strings_of, imports_of, module_files

LAYERS = ("cli", "integrations", "runtime")
ALLOWED = {
    "core": {"core"},
    "runtime": {"core", "runtime"},
    "integrations": {"core", "runtime", "integrations"},
    "cli": {"core", "runtime", "integrations", "cli"},
    "lab": {"core", "runtime", "integrations", "cli", "lab"},
}


#: the one string that crosses the layers on purpose: ``from causalcache_memory import CausalCacheMemory``
#: resolves the LangGraph drop-in lazily from the package root (docs/ARCHITECTURE.md, "The core is light")
FACADE = {("causalcache_memory", "causalcache_memory.integrations.langgraph")}


def layer_of(module: str) -> str:
    if module == "causalcache_lab" or module.startswith("causalcache_lab."):
        return "lab"
    for name in LAYERS:
        prefix = f"causalcache_memory.{name}"
        if module == prefix or module.startswith(prefix + "."):
            return name
    return "core"


def violations(modules: dict[str, Path]) -> list[str]:
    """``"a -> b"`` for every import that crosses the layering rule."""
    out = []
    for name, path in sorted(modules.items()):
        for target in sorted(imports_of(name, path, modules)):
            if target not in modules:
                continue
            if layer_of(target) not in ALLOWED[layer_of(name)]:
                out.append(f"{name} ({layer_of(name)}) -> {target} ({layer_of(target)})")
    return out


def string_violations(modules: dict[str, Path]) -> list[str]:
    """``"a -> 'b'"`` for every import-path string that crosses the layering rule (outside :data:`FACADE`)."""
    out = []
    for name, path in sorted(modules.items()):
        for target in sorted(import_strings_of(path, modules)):
            if (name, target) in FACADE:
                continue
            if layer_of(target) not in ALLOWED[layer_of(name)]:
                out.append(f"{name} ({layer_of(name)}) -> '{target}' ({layer_of(target)})")
    return out


def test_every_import_respects_the_layers() -> None:
    assert violations(module_files()) == []


def test_every_import_path_string_respects_the_layers() -> None:
    assert string_violations(module_files()) == []


def test_the_guard_catches_an_import_path_string_into_the_lab(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    # a registry entry by import path, as the core's runtime registry once held for the simulated policy
    probe.write_text(
        '"""Docstrings may name causalcache_lab.world freely."""\n'
        '_REGISTRY = {"simulated": "causalcache_lab.world.sim_policy:policy_from_config"}\n'
        'MODULE = "causalcache_memory.runtime.sglang_client"\n',
        encoding="utf-8",
    )
    modules = {**module_files(), "causalcache_memory.probe": probe}
    assert string_violations(modules) == [
        "causalcache_memory.probe (core) -> 'causalcache_lab.world.sim_policy' (lab)",
        "causalcache_memory.probe (core) -> 'causalcache_memory.runtime.sglang_client' (runtime)",
    ]


def test_the_guard_catches_a_core_module_importing_the_lab(tmp_path) -> None:
    modules = module_files()
    probe = tmp_path / "probe.py"
    # a lazy import inside a function counts as much as a top-level one
    probe.write_text("def f():\n    from causalcache_lab.world import generate_tasks\n", encoding="utf-8")
    modules["causalcache_memory.allocation.probe"] = probe
    assert violations(modules) == [
        "causalcache_memory.allocation.probe (core) -> causalcache_lab.world (lab)"
    ]
    type_only = tmp_path / "type_only.py"
    type_only.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from causalcache_memory.runtime import x\n",
        encoding="utf-8",
    )
    modules = {**module_files(), "causalcache_memory.render.type_only": type_only}
    assert violations(modules) == []


def test_the_guard_catches_the_runtime_importing_an_integration(tmp_path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("import causalcache_memory.integrations.langgraph\n", encoding="utf-8")
    modules = {**module_files(), "causalcache_memory.runtime.probe": probe}
    assert violations(modules) == [
        "causalcache_memory.runtime.probe (runtime) -> causalcache_memory.integrations.langgraph (integrations)"
    ]


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
