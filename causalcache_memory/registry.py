"""One registry pattern for every "names valid in YAML / on the command line" table of the project.

A :class:`Registry` maps a name to an entry (a factory, a builder, a format object) and offers three
operations: :meth:`~Registry.register`, :meth:`~Registry.available` and :meth:`~Registry.lookup`. An
unknown name is refused with an error that names the field, the value and every registered name, and how
to register one. The project's registries all are instances of it:

* allocators: :data:`causalcache_memory.allocation.registry.ALLOCATORS` (``allocation.allocator``);
* runtimes (the policy, i.e. the VLM): ``causalcache_memory.runtime.registry.RUNTIMES``
  (``policy.kind``); the synthetic world's ``simulated`` runtime is registered by the lab;
* chat formats of text-prompt servers: ``causalcache_memory.runtime.chat_format.CHAT_FORMATS``;
* dataset loaders: ``causalcache_lab.data.loaders.LOADERS`` (``causalcache data import FORMAT``).

Entries are callables or objects, never import-path strings: a built-in entry whose module is heavy is a
small function that imports it when called, so the layer rule (docs/ARCHITECTURE.md) sees every import.
Other installed distributions add entries through a registry's ``entry_point_group`` (standard Python
entry points, ``name = "module:attribute"``), loaded the first time a name is looked up or listed; this is
how the lab's ``simulated`` runtime reaches ``policy.kind`` without the library importing the lab.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

from causalcache_memory.errors import CausalCacheError, ConfigError

__all__ = ["Registry"]

T = TypeVar("T")


class Registry(Generic[T]):
    """Names -> entries, with one register / available / lookup contract.

    Args:
        kind: what is registered, for messages (``"allocator"``, ``"runtime"``).
        field: where a name comes from, for messages (``"allocation.allocator"``, ``"policy.kind"``).
        register_with: the public function that adds an entry (named in the unknown-name error).
        error: the :class:`CausalCacheError` subclass raised (default :class:`ConfigError`).
        renamed: names that were replaced during development -> their current name. A renamed name is
            never accepted; the error names the current one (a clear message, not a compatibility alias).
        hint: a sentence appended to the unknown-name error (e.g. where optional entries come from).
        entry_point_group: an entry-point group whose entries (``name = "module:attribute"``) are
            registered on first lookup or listing; a name registered in code wins over an entry point.
    """

    def __init__(
        self,
        kind: str,
        *,
        field: str,
        register_with: str,
        error: type[CausalCacheError] = ConfigError,
        renamed: Mapping[str, str] | None = None,
        hint: str = "",
        entry_point_group: str | None = None,
    ) -> None:
        self.kind = kind
        self.field = field
        self.register_with = register_with
        self.error = error
        self.renamed = dict(renamed or {})
        self.hint = hint
        self.entry_point_group = entry_point_group
        self._entries: dict[str, T] = {}
        self._plugins_loaded = entry_point_group is None

    def _load_plugins(self) -> None:
        """Register the entries of :attr:`entry_point_group` once (names already registered are kept)."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        from importlib.metadata import entry_points

        for entry in entry_points(group=self.entry_point_group or ""):
            if entry.name not in self._entries:
                self._entries[entry.name] = entry.load()

    def register(self, name: str, entry: T, *, overwrite: bool = False) -> None:
        """Add ``entry`` under ``name`` (a non-empty identifier; ``-`` allowed); a taken name needs ``overwrite``."""
        if not isinstance(name, str) or not name or not name.replace("_", "").replace("-", "").isalnum():
            raise self.error(f"{self.kind} name {name!r} must be a non-empty identifier")
        if name in self._entries and not overwrite:
            raise self.error(f"{self.kind} {name!r} is already registered; pass overwrite=True to replace it")
        self._entries[name] = entry

    def available(self) -> list[str]:
        """The registered names, sorted."""
        self._load_plugins()
        return sorted(self._entries)

    def lookup(self, name: object) -> T:
        """The entry of ``name``, else ``error`` naming the field, the value and the registered names."""
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        self._load_plugins()
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        hint = ""
        if isinstance(name, str) and name in self.renamed:
            hint = f" ({name!r} is now called {self.renamed[name]!r}: set {self.field}: {self.renamed[name]})"
        raise self.error(
            f"{self.field}={name!r} is not a registered {self.kind}{hint}; registered: "
            f"{', '.join(self.available()) or 'none'} (register your own with {self.register_with})"
            + (f"; {self.hint}" if self.hint else "")
        )

    def copy(self) -> Registry[T]:
        """An independent registry with the same entries (tests isolate their registrations with it)."""
        out: Registry[T] = Registry(
            self.kind,
            field=self.field,
            register_with=self.register_with,
            error=self.error,
            renamed=self.renamed,
            hint=self.hint,
            entry_point_group=self.entry_point_group,
        )
        self._load_plugins()
        out._entries = dict(self._entries)
        return out

    def __contains__(self, name: object) -> bool:
        if name not in self._entries:
            self._load_plugins()
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self.available())

    def __len__(self) -> int:
        self._load_plugins()
        return len(self._entries)
