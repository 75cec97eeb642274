"""Names and modules renamed in 0.2, importable for one more release with a :class:`DeprecationWarning`.

* Allocation strategies are *allocators* (``Allocator``, ``RecentAllocator``, ...): "policy" now means the
  VLM only. :func:`alias_getattr` gives a module a ``__getattr__`` that resolves the old names.
* Training, evaluation, benchmark and synthetic-world code moved under :mod:`causalcache_memory.lab`, and
  the HGKV adapter under :mod:`causalcache_memory.runtime.hgkv`. :class:`MovedModuleFinder` (installed by
  the package's ``__init__``) makes the old module paths import the new modules.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["MOVED_MODULES", "RENAMED", "MovedModuleFinder", "alias_getattr", "install_finder"]

#: old public name -> new name (same module)
RENAMED: Mapping[str, str] = {
    "AllocationPolicy": "Allocator",
    "RecentPolicy": "RecentAllocator",
    "RandomPolicy": "RandomAllocator",
    "SummaryOnlyPolicy": "SummaryOnlyAllocator",
    "RGBSimilarityPolicy": "RGBSimilarityAllocator",
    "LearnedSelectorPolicy": "LearnedSelectorAllocator",
    "register_allocation_policy": "register_allocator",
    "build_allocation_policy": "build_allocator",
    "available_allocation_policies": "available_allocators",
}

#: old module path -> new module path (prefixes; submodules follow)
MOVED_MODULES: Mapping[str, str] = {
    "causalcache_memory.world": "causalcache_memory.lab.world",
    "causalcache_memory.eval": "causalcache_memory.lab.eval",
    "causalcache_memory.bench": "causalcache_memory.lab.bench",
    "causalcache_memory.data": "causalcache_memory.lab.data",
    "causalcache_memory.hgkv": "causalcache_memory.lab.hgkv",
    "causalcache_memory.hgkv.adapter": "causalcache_memory.runtime.hgkv.adapter",
    "causalcache_memory.hgkv.gate": "causalcache_memory.runtime.hgkv.gate",
    "causalcache_memory.hgkv.layer": "causalcache_memory.runtime.hgkv.layer",
    "causalcache_memory.hgkv.io": "causalcache_memory.runtime.hgkv.io",
    "causalcache_memory.selector.policy": "causalcache_memory.selector.allocator",
    "causalcache_memory.selector.labels": "causalcache_memory.lab.selector.labels",
    "causalcache_memory.selector.train": "causalcache_memory.lab.selector.train",
    "causalcache_memory.selector.model": "causalcache_memory.lab.selector.model",
    "causalcache_memory.selector.export": "causalcache_memory.lab.selector.export",
    "causalcache_memory.selector.recipe": "causalcache_memory.lab.selector.recipe",
    "causalcache_memory.selector.ladder": "causalcache_memory.lab.selector.ladder",
}


def _warn(old: str, new: str, what: str) -> None:
    warnings.warn(
        f"{what} {old!r} is deprecated and will be removed in 0.3; use {new!r}",
        DeprecationWarning,
        stacklevel=3,
    )


def alias_getattr(module_name: str, namespace: Mapping[str, Any]) -> Callable[[str], Any]:
    """A module ``__getattr__`` resolving the old names of :data:`RENAMED` present in ``namespace``."""

    def __getattr__(name: str) -> Any:
        new = RENAMED.get(name)
        if new is not None and new in namespace:
            _warn(f"{module_name}.{name}", f"{module_name}.{new}", "name")
            return namespace[new]
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")

    return __getattr__


def _new_name(fullname: str) -> str | None:
    best = max(
        (old for old in MOVED_MODULES if fullname == old or fullname.startswith(old + ".")),
        default=None,
        key=len,
    )
    if best is None:
        return None
    return MOVED_MODULES[best] + fullname[len(best) :]


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, new: str) -> None:
        self.new = new

    def create_module(self, spec: Any) -> Any:
        _warn(spec.name, self.new, "module")
        module = importlib.import_module(self.new)
        sys.modules[spec.name] = module
        return module

    def exec_module(self, module: Any) -> None:  # the target module is already executed
        return None


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Imports an old module path of :data:`MOVED_MODULES` as its new module, with a warning."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        new = _new_name(fullname)
        if new is None or new == fullname:
            return None
        return importlib.util.spec_from_loader(fullname, _AliasLoader(new))


def install_finder() -> None:
    """Put one :class:`MovedModuleFinder` on ``sys.meta_path`` (idempotent)."""
    if not any(isinstance(f, MovedModuleFinder) for f in sys.meta_path):
        sys.meta_path.append(MovedModuleFinder())
