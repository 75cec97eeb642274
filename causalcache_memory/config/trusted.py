"""Factories named in config files (``"package.module:callable"``): only trusted modules may run.

A selector recipe's ``setup``/``data``/``archive``/``policy`` and a learn config's ``labeller`` and
``screen_text`` name a callable that the command imports and calls: such a file runs code, so trust it as
code. A factory is accepted only when its module is

* part of this project (:data:`PROJECT_MODULES`: ``causalcache_memory`` and its submodules; the lab adds
  its own package where it loads its recipes), or
* trusted explicitly by the user: named with ``--trust-module MODULE`` on the command line (``learn``,
  ``label selector``, ``train selector``, ``eval ladder``) or in the environment variable
  :data:`TRUSTED_ENV` (comma-separated). A name trusts that module and its submodules.

Anything else is refused when the file is loaded, before any factory is imported or called, with a
:class:`~causalcache_memory.errors.ConfigError` naming the field, the value and the fix. The callable is
then resolved only through public attributes (no name starting with ``_``), never through a module object,
and must itself be defined in a trusted module, so ``causalcache_memory.x:os.system`` or a re-exported
``subprocess.run`` is refused as well.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from causalcache_memory.errors import ConfigError

__all__ = ["PROJECT_MODULES", "TRUSTED_ENV", "factory_error", "resolve_factory", "trusted_modules"]

#: modules every config file may name (the project's own packages)
PROJECT_MODULES = ("causalcache_memory",)
#: environment variable listing more trusted modules (comma-separated), like ``--trust-module``
TRUSTED_ENV = "CAUSALCACHE_TRUSTED_MODULES"

_DOTTED = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")
#: the most characters of a value an error message repeats
_SHOWN = 80


def shown(value: object) -> str:
    """``repr(value)`` cut to a few dozen characters (error messages never echo a whole value)."""
    text = repr(value)
    return text if len(text) <= _SHOWN else f"{text[: _SHOWN - 3]}...(cut, {len(text)} characters)"


def trusted_modules(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The project's modules, those in :data:`TRUSTED_ENV` and ``extra`` (each checked: a dotted name)."""
    named = [n.strip() for n in os.environ.get(TRUSTED_ENV, "").split(",") if n.strip()]
    out = list(PROJECT_MODULES)
    for source, names in ((TRUSTED_ENV, named), ("--trust-module", list(extra))):
        for name in names:
            if not isinstance(name, str) or _DOTTED.fullmatch(name) is None:
                raise ConfigError(
                    f"{source} names {shown(name)}, which is not a module name; give dotted module names "
                    "such as mypkg.labellers"
                )
            out.append(name)
    return tuple(dict.fromkeys(out))


def _is_trusted(module: str, trusted: tuple[str, ...]) -> bool:
    return any(module == t or module.startswith(t + ".") for t in trusted)


def factory_error(field: str, factory: object, trusted: tuple[str, ...]) -> str | None:
    """Why ``factory`` (the value of ``field``) may not run, or None when its module is trusted.
    Imports nothing."""
    if not isinstance(factory, str):
        return f"{field}={shown(factory)} must be an import path 'package.module:callable'"
    module, _, name = factory.partition(":")
    if _DOTTED.fullmatch(module) is None or _DOTTED.fullmatch(name) is None:
        return f"{field}={shown(factory)} must be an import path 'package.module:callable'"
    if any(part.startswith("_") for part in name.split(".")):
        return (
            f"{field}={shown(factory)} names a private attribute; name a public callable "
            "'package.module:callable'"
        )
    if not _is_trusted(module, trusted):
        return (
            f"{field}={shown(factory)}: module {module!r} is not trusted to run from a config file (a "
            "factory runs code; trust the file as code). Name a callable under causalcache_memory, or, "
            f"if you trust that module, pass --trust-module {module} or set {TRUSTED_ENV}={module}"
        )
    return None


def resolve_factory(field: str, factory: str, trusted: tuple[str, ...]) -> Callable[..., Any]:
    """The callable ``factory`` names, after :func:`factory_error`'s check; its attribute path never
    passes through a module, and the callable is defined in a trusted module. Calls nothing."""
    error = factory_error(field, factory, trusted)
    if error:
        raise ConfigError(error, [error])
    module, _, name = factory.partition(":")
    try:
        obj: Any = importlib.import_module(module)
        for part in name.split("."):  # 'module:Class.from_pretrained' names a classmethod
            obj = getattr(obj, part)
            if isinstance(obj, ModuleType):
                raise ConfigError(
                    f"{field}={shown(factory)} reaches the module {obj.__name__!r} through an attribute; "
                    f"name the callable in its own module (pass --trust-module for it if you trust it)"
                )
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{field}={shown(factory)} cannot be imported: {exc}") from exc
    home = getattr(obj, "__module__", None)
    if not callable(obj) or not isinstance(home, str) or not _is_trusted(home, trusted):
        raise ConfigError(
            f"{field}={shown(factory)} is {'defined in ' + repr(home) if isinstance(home, str) else 'not a function or class'}"
            f", not in a trusted module; name a callable defined under causalcache_memory or in a module you "
            f"trust (--trust-module MODULE, or {TRUSTED_ENV})"
        )
    return obj
