"""Tenant namespaces: one archive per tenant, beside each other under ``<archive>/tenants/<name>``.

A namespaced archive is a complete archive of its own (blobs, records, texts, references, GC): a
screenshot, a trace record or a reference of tenant A is stored under A's prefix, so no read, listing or
``gc`` of tenant B's archive can reach it. Content addressing stays within a tenant (the same screenshot
sent by two tenants is stored twice: sharing it would tell one tenant what another has seen).

Names come from the run (the LangGraph integration reads them from ``configurable``); a name that is not
archive-safe, or that looks like a hashed one, is replaced by ``ns-`` and 32 hex digits of its sha256,
so two different tenants never share a folder.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from causalcache_memory.errors import ConfigError

__all__ = [
    "TENANTS",
    "is_namespace_folder",
    "namespace_name",
    "open_namespace",
    "tenant_archives",
    "tenant_names",
]

#: the folder of an archive that holds its tenants' archives
TENANTS = "tenants"
_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}$")
_HASHED = re.compile(r"^ns-[0-9a-f]{32}$")


def is_namespace_folder(name: str) -> bool:
    """Whether ``name`` is a folder :func:`namespace_name` can return (kept as is, or hashed)."""
    return bool(_HASHED.fullmatch(name)) or namespace_name([name]) == name


def namespace_name(parts: tuple[Any, ...] | list[Any]) -> str:
    """The folder name of a tenant named by ``parts`` (``configurable`` values, in key order)."""
    if not parts or any(p is None or str(p) == "" for p in parts):
        raise ConfigError(f"an archive namespace needs non-empty values, got {list(parts)!r}")
    text = "/".join(str(p) for p in parts)
    if _SAFE.fullmatch(text) and not text.startswith("ns-") and ".." not in text:
        return text
    return "ns-" + hashlib.sha256(text.encode()).hexdigest()[:32]


def open_namespace(archive: Any, name: str) -> Any:
    """The archive of tenant ``name`` inside ``archive`` (same backend and options, its own prefix).

    ``archive`` must offer ``child(relpath)`` (:class:`~causalcache_memory.archive.local.LocalArchive`,
    :class:`~causalcache_memory.archive.remote.FsspecArchive` and
    :class:`~causalcache_memory.archive.cached.CachedArchive` do).
    """
    if not is_namespace_folder(name):
        raise ConfigError(f"namespace {name!r} is not a namespace folder name; use namespace_name(...)")
    child = getattr(archive, "child", None)
    if child is None:
        raise ConfigError(
            f"archive.namespace_keys is set but {type(archive).__name__} cannot hold namespaces (it has no "
            "child(); use a LocalArchive, an fsspec URL or a CachedArchive, or drop namespace_keys)"
        )
    return child(f"{TENANTS}/{name}")


def tenant_names(archive: Any) -> list[str]:
    """The tenants that have an archive inside ``archive`` (sorted; none for a store it cannot list)."""
    inner = getattr(archive, "inner", archive)  # a CachedArchive lists its shared store
    root = getattr(inner, "root", None)
    fs = getattr(inner, "fs", None)
    try:
        if fs is not None:
            entries = fs.ls(f"{root}/{TENANTS}", detail=True)
            names = [
                str(e["name"]).rstrip("/").rsplit("/", 1)[-1] for e in entries if e.get("type") == "directory"
            ]
        elif root is not None:
            folder = Path(root) / TENANTS
            names = [e.name for e in folder.iterdir() if e.is_dir() and not e.is_symlink()]
        else:
            return []
    except (FileNotFoundError, NotADirectoryError):
        return []
    return sorted(n for n in names if is_namespace_folder(n))


def tenant_archives(archive: Any) -> list[tuple[str, Any]]:
    """``(name, archive)`` of every tenant archive inside ``archive`` (see :func:`tenant_names`)."""
    return [(name, open_namespace(archive, name)) for name in tenant_names(archive)]
