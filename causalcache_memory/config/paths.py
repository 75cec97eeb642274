"""Relative paths in a YAML config are relative to the YAML file's folder, not the working directory.

:func:`resolve_config_paths` rewrites, in the raw mapping read from a file, every filesystem path the
configuration holds, so a config works the same from any working directory (an agent resumed from
another directory finds its archive and checkpoints):

* ``archive.url`` (unless it is a URL such as ``s3://...`` or ``memory://...``);
* ``checkpointer.path`` (unless ``:memory:``);
* ``allocation.selector.model_path``, ``policy.transformers.model_path`` and ``adapter_path``.

The archive and checkpointer defaults (``.causalcache/archive``, ``.causalcache/checkpoints.sqlite``)
are filesystem paths too: when a file leaves them out they are placed next to the file. ``~`` is expanded;
absolute paths are kept. Configs built in code (``parse_config``, ``CausalCacheConfig(...)``) are not
touched: their relative paths stay relative to the working directory.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["PATH_KEYS", "resolve_config_paths"]

#: (section path, key, filled from the model default when absent)
PATH_KEYS: tuple[tuple[tuple[str, ...], str, bool], ...] = (
    (("archive",), "url", True),
    (("checkpointer",), "path", True),
    (("allocation", "selector"), "model_path", False),
    (("policy", "transformers"), "model_path", False),
    (("policy", "transformers"), "adapter_path", False),
)
_SPECIAL = (":memory:", "")


def _default(section: tuple[str, ...], key: str) -> Any:
    from causalcache_memory.config.models import CausalCacheConfig

    model: Any = CausalCacheConfig
    for part in section:
        model = model.model_fields[part].annotation
    return model.model_fields[key].default


def _resolve(value: Any, base: Path) -> Any:
    if not isinstance(value, str) or value in _SPECIAL or "://" in value:
        return value
    path = Path(os.path.expanduser(value))
    return str(path if path.is_absolute() else (base / path).resolve())


def resolve_config_paths(data: Any, base_dir: str | Path) -> Any:
    """A copy of the raw config mapping ``data`` with its relative paths resolved against ``base_dir``.

    Anything that is not a mapping (an invalid file) is returned unchanged for validation to report.
    """
    if not isinstance(data, Mapping):
        return data
    base = Path(base_dir).resolve()
    out: dict[str, Any] = dict(data)
    for section, key, fill in PATH_KEYS:
        parent: Any = out
        for part in section:
            child = parent.get(part) if isinstance(parent, Mapping) else None
            if child is None and fill:
                child = {}
            if not isinstance(child, Mapping):
                break
            child = dict(child)
            parent[part] = child
            parent = child
        else:
            if key in parent:
                parent[key] = _resolve(parent[key], base)
            elif fill:
                if section == ("checkpointer",) and parent.get("kind") not in (None, "sqlite"):
                    continue
                parent[key] = _resolve(_default(section, key), base)
    return out
