"""Dataset loaders: each turns one upstream format into trajectories plus a screenshot archive.

Formats (docs/DATA.md describes each one's files, timing convention and mapping):
``agentnet`` (AgentNet/OpenCUA JSONL), ``osworld`` (OSWorld results folders), ``mobileworld``
(MobileWorld run folders), ``androidcontrol`` (AndroidControl TFRecords, extra ``androidcontrol``),
``causalcache`` (threads recorded by CausalCacheMemory) and ``jsonl`` (the generic schema for any other
agent's logs).

The formats are the registry :data:`LOADERS` (a :class:`~causalcache_memory.registry.Registry` of
:class:`DatasetLoader`); ``causalcache data import FORMAT`` offers exactly its names. Add a format with
:func:`register_loader`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from causalcache_lab.data.loaders._common import DatasetFormatError, LoadReport, LoadResult
from causalcache_lab.data.loaders.agentnet import load_agentnet
from causalcache_lab.data.loaders.androidcontrol import load_androidcontrol
from causalcache_lab.data.loaders.causalcache import load_causalcache
from causalcache_lab.data.loaders.jsonl import load_jsonl
from causalcache_lab.data.loaders.mobileworld import load_mobileworld
from causalcache_lab.data.loaders.osworld import load_osworld
from causalcache_memory.errors import ConfigError
from causalcache_memory.registry import Registry

__all__ = [
    "LOADERS",
    "DatasetFormatError",
    "DatasetLoader",
    "LoadReport",
    "LoadResult",
    "available_loaders",
    "load",
    "lookup_loader",
    "register_loader",
]


@dataclass(frozen=True)
class DatasetLoader:
    """One dataset format.

    Attributes:
        load: ``load(src, archive, **options) -> LoadResult``.
        options: the keyword options ``load`` accepts (others are refused by :func:`load`).
        radius: default pointer tolerance of full-action equivalence when mining (relative units; the
            library's evaluator defaults: 0.014 on desktop, 0.04 on mobile); None = per trajectory platform.
    """

    load: Callable[..., LoadResult]
    options: tuple[str, ...] = ()
    radius: float | None = None


#: the dataset-format registry (``causalcache data import FORMAT``)
LOADERS: Registry[DatasetLoader] = Registry(
    "dataset format",
    field="format",
    register_with="causalcache_lab.data.loaders.register_loader",
    error=ConfigError,
)
LOADERS.register("agentnet", DatasetLoader(load_agentnet, ("images",), radius=0.014))
LOADERS.register("osworld", DatasetLoader(load_osworld, ("examples",), radius=0.014))
LOADERS.register("mobileworld", DatasetLoader(load_mobileworld, ("metadata", "coords"), radius=0.04))
LOADERS.register("androidcontrol", DatasetLoader(load_androidcontrol, (), radius=0.04))
LOADERS.register("causalcache", DatasetLoader(load_causalcache, ("source_archive",), radius=None))
LOADERS.register("jsonl", DatasetLoader(load_jsonl, (), radius=None))


def register_loader(name: str, loader: DatasetLoader, *, overwrite: bool = False) -> None:
    """Make ``loader`` importable as dataset format ``name``."""
    LOADERS.register(name, loader, overwrite=overwrite)


def available_loaders() -> list[str]:
    return LOADERS.available()


def lookup_loader(fmt: object) -> DatasetLoader:
    """The :class:`DatasetLoader` of ``fmt``, else a :class:`ConfigError` listing the formats."""
    return LOADERS.lookup(fmt)


def load(fmt: str, src: Any, archive: Any, **options: Any) -> LoadResult:
    """Run the ``fmt`` loader; options it does not accept raise :class:`ConfigError`."""
    loader = lookup_loader(fmt)
    given = {k: v for k, v in options.items() if v is not None}
    extra = sorted(set(given) - set(loader.options))
    if extra:
        raise ConfigError(
            f"option(s) {extra} do not apply to format {fmt!r} (it accepts: {', '.join(loader.options) or 'none'})"
        )
    return loader.load(src, archive, **given)
