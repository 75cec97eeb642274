"""Dataset loaders: each turns one upstream format into trajectories plus a screenshot archive.

Formats (docs/DATA.md describes each one's files, timing convention and mapping):
``agentnet`` (AgentNet/OpenCUA JSONL), ``osworld`` (OSWorld results folders), ``mobileworld``
(MobileWorld run folders), ``androidcontrol`` (AndroidControl TFRecords, extra ``androidcontrol``),
``causalcache`` (threads recorded by CausalCacheMemory) and ``jsonl`` (the generic schema for any other
agent's logs).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.data.loaders._common import DatasetFormatError, LoadReport, LoadResult

__all__ = ["FORMATS", "DatasetFormatError", "LoadReport", "LoadResult", "get_loader"]

#: format name -> (module, function, options the loader accepts)
FORMATS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "agentnet": ("agentnet", "load_agentnet", ("images",)),
    "osworld": ("osworld", "load_osworld", ("examples",)),
    "mobileworld": ("mobileworld", "load_mobileworld", ("metadata", "coords")),
    "androidcontrol": ("androidcontrol", "load_androidcontrol", ()),
    "causalcache": ("causalcache", "load_causalcache", ("source_archive",)),
    "jsonl": ("jsonl", "load_jsonl", ()),
}


def get_loader(fmt: str) -> tuple[Callable[..., LoadResult], tuple[str, ...]]:
    """The loader function of ``fmt`` and the options it accepts."""
    if fmt not in FORMATS:
        raise ConfigError(f"format={fmt!r} is not a dataset format; use one of {', '.join(FORMATS)}")
    module, name, options = FORMATS[fmt]
    return getattr(importlib.import_module(f"{__name__}.{module}"), name), options


def load(fmt: str, src: Any, archive: Any, **options: Any) -> LoadResult:
    """Run the ``fmt`` loader; options it does not accept raise :class:`ConfigError`."""
    loader, accepted = get_loader(fmt)
    given = {k: v for k, v in options.items() if v is not None}
    extra = sorted(set(given) - set(accepted))
    if extra:
        raise ConfigError(
            f"option(s) {extra} do not apply to format {fmt!r} (it accepts: {', '.join(accepted) or 'none'})"
        )
    return loader(src, archive, **given)
