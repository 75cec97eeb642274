"""The modules the lab's config files (selector recipes, ``learn.yaml``) may name as factories: the
library's trusted modules (:func:`causalcache_memory.config.trusted.trusted_modules`) plus the lab itself."""

from __future__ import annotations

from collections.abc import Iterable

from causalcache_memory.config.trusted import trusted_modules

__all__ = ["lab_trusted_modules"]


def lab_trusted_modules(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """:func:`trusted_modules` with ``causalcache_lab`` added before ``extra`` (``--trust-module``)."""
    return trusted_modules(("causalcache_lab", *extra))
