"""Archive namespaces from LangGraph's ``configurable``: one archive per tenant (tenant isolation).

With ``archive.namespace_keys: [tenant_id]`` every run's screenshots, trace records and references go
to the archive's ``tenants/<tenant_id>`` sub-archive (:mod:`causalcache_memory.archive.namespaces`), read
from the run's ``config["configurable"]`` (the running graph's config inside a node, the ``config``
argument outside one: ``memory.trace(graph, config)``, ``memory.screenshot_message(..., config=config)``).
A run whose configurable lacks a key is refused, never sent to a shared archive: fail closed.

A tenant's thread therefore never reads another tenant's blobs, whatever hash it holds: a reference
to a screenshot stored only by another tenant is not found (``BlobNotFoundError``). Thread ids still
key LangGraph's checkpoints: tenants that share a checkpointer need distinct ``thread_id`` values (as
LangGraph itself requires); the namespace isolates the archive, the thread id the checkpoints.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from causalcache_memory.archive.namespaces import namespace_name, open_namespace
from causalcache_memory.errors import ConfigError

__all__ = ["NamespacedArchives", "namespace_of"]

#: tenant archives kept open per memory (the oldest is reopened when needed again: it is only a prefix)
MAX_OPEN = 256


def _running_configurable() -> Mapping[str, Any] | None:
    try:
        from langgraph.config import get_config

        return get_config().get("configurable") or {}
    except (ImportError, RuntimeError):  # outside a running graph
        return None


def namespace_of(keys: Sequence[str], config: Mapping[str, Any] | None) -> str:
    """The namespace folder named by ``keys`` in ``config["configurable"]`` (else the running graph's)."""
    configurable = (config or {}).get("configurable") if config is not None else _running_configurable()
    if configurable is None:
        raise ConfigError(
            f"archive.namespace_keys={list(keys)!r}: outside a running graph, pass the run's config (e.g. "
            "memory.trace(graph, config), memory.screenshot_message(png, text, config=config))"
        )
    missing = [k for k in keys if configurable.get(k) in (None, "")]
    if missing:
        raise ConfigError(
            f"archive.namespace_keys={list(keys)!r}: the run's configurable has no value for {missing!r}; "
            f"invoke with config={{'configurable': {{'thread_id': ..., {missing[0]!r}: ...}}}} (a run "
            "without its tenant is refused, never sent to a shared archive)"
        )
    return namespace_name([configurable[k] for k in keys])


class NamespacedArchives:
    """The tenant archives of a memory, opened once per (base archive, namespace)."""

    def __init__(self) -> None:
        self._open: OrderedDict[tuple[int, str], tuple[Any, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def archive(self, base: Any, keys: Sequence[str], config: Mapping[str, Any] | None) -> Any:
        """The sub-archive of ``base`` for the tenant ``config`` names (see :func:`namespace_of`)."""
        name = namespace_of(keys, config)
        key = (id(base), name)
        with self._lock:
            entry = self._open.get(key)
            if entry is None or entry[0] is not base:
                entry = (base, open_namespace(base, name))
                self._open[key] = entry
                while len(self._open) > MAX_OPEN:
                    self._open.popitem(last=False)
            self._open.move_to_end(key)
            return entry[1]
