"""The labeller's version: part of the labels stage's identity, so a changed labeller relabels.

The labels stage is skipped when its inputs are unchanged (:mod:`.stages`). Its inputs named the labeller
only by ``labeller.factory`` and ``labeller.kwargs``, so editing the labeller's code (a team's
LangChain wrapper, its parser, its prompt) kept labels the new code would not give. The version is,
in this order:

1. **declared**: a ``labeller_version`` attribute of the factory callable (or of its class, for a
   ``module:Class.method`` factory), else ``LABELLER_VERSION`` in the factory's module; any string the
   team bumps when its labeller changes (editing a comment then relabels nothing);
2. **source**: the sha256 (16 hex digits) of the source files of the factory's module and of the module
   that defines the factory callable (a class method's class may live elsewhere). Code that the labeller
   imports from other modules is not covered: declare a version for that.

A factory whose version can be neither read nor hashed (no declared version, no source file: a compiled
or built-in module) is refused with the fix named, before anything is labelled.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from causalcache_memory.errors import ConfigError

__all__ = ["DECLARED_ATTRIBUTE", "MODULE_ATTRIBUTE", "labeller_version"]

#: attribute of the factory callable (or its class) that declares the labeller's version
DECLARED_ATTRIBUTE = "labeller_version"
#: module-level constant that declares it
MODULE_ATTRIBUTE = "LABELLER_VERSION"


def _resolve(factory: str) -> tuple[Any, Any, Any]:
    """``(module, owner, callable)`` named by ``'package.module:name.attr'`` (owner: the object holding it)."""
    module_name, _, name = factory.partition(":")
    if not module_name or not name:
        raise ConfigError(f"labeller.factory={factory!r} must be an import path 'package.module:callable'")
    try:
        module = importlib.import_module(module_name)
        owner, obj = module, module
        for part in name.split("."):
            owner, obj = obj, getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"labeller.factory={factory!r} cannot be imported: {exc}") from exc
    return module, owner, obj


def _declared(module: Any, owner: Any, obj: Any) -> str | None:
    for holder in (obj, getattr(obj, "__func__", None), owner if inspect.isclass(owner) else None):
        value = getattr(holder, DECLARED_ATTRIBUTE, None) if holder is not None else None
        if isinstance(value, str) and value:
            return value
    value = getattr(module, MODULE_ATTRIBUTE, None)
    return value if isinstance(value, str) and value else None


def _source_file(module: Any) -> Path | None:
    try:
        path = inspect.getsourcefile(module)
    except TypeError:  # built-in module
        return None
    return Path(path) if path and Path(path).is_file() else None


def labeller_version(factory: str) -> dict[str, str]:
    """``{"version": ..., "from": "declared" | "source"}`` of the labeller ``factory`` (module doc)."""
    module, owner, obj = _resolve(factory)
    declared = _declared(module, owner, obj)
    if declared is not None:
        return {"version": declared, "from": "declared"}
    defining = sys.modules.get(getattr(obj, "__module__", "") or "") or module
    files = {f for f in (_source_file(module), _source_file(defining)) if f is not None}
    if not files:
        raise ConfigError(
            f"labeller.factory={factory!r}: the labeller's version cannot be told (module "
            f"{module.__name__!r} has no source file), so a changed labeller would keep stale labels; "
            f"declare one: set {DECLARED_ATTRIBUTE} = '1' on the factory or {MODULE_ATTRIBUTE} = '1' in "
            "its module, and bump it whenever the labeller changes"
        )
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(path.read_bytes())
    return {"version": digest.hexdigest()[:16], "from": "source"}


def adopt_unversioned(stages: Any, name: str, inputs: dict[str, Any]) -> str | None:
    """Keep a labels stage written before its identity held the labeller's version, when every other
    input is the same: its manifest is restamped with ``inputs`` (so upgrading does not relabel what a
    GPU already paid for) and the note returned says how to relabel; None when there is nothing to adopt.
    """
    from causalcache_lab.learn.stages import MANIFEST, inputs_hash
    from causalcache_memory._jsonl import write_json

    old = stages.manifest(name)
    if old is None or "labeller_version" in (old.get("inputs") or {}) or "labeller_version" not in inputs:
        return None
    legacy = {k: v for k, v in inputs.items() if k != "labeller_version"}
    if old.get("inputs_hash") != inputs_hash(legacy):
        return None
    write_json(
        stages.root / name / MANIFEST,
        {**old, "inputs": inputs, "inputs_hash": inputs_hash(inputs)},
        sort_keys=True,
    )
    return (
        f"{name} was labelled before learn recorded the labeller's version; kept as the labels of version "
        f"{inputs['labeller_version']['version']}. If the labeller changed since, delete {stages.root / name} "
        "to relabel"
    )
