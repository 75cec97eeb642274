"""The modules the lab's config files (selector recipes, ``learn.yaml``) may name as factories: the
library's trusted modules (:func:`causalcache_memory.config.trusted.trusted_modules`) plus the lab itself."""

from __future__ import annotations

import argparse
from collections.abc import Iterable

from causalcache_memory.config.trusted import trusted_modules

__all__ = ["add_trust_module_argument", "lab_trusted_modules"]


def lab_trusted_modules(extra: Iterable[str] = ()) -> tuple[str, ...]:
    """:func:`trusted_modules` with ``causalcache_lab`` added before ``extra`` (``--trust-module``)."""
    return trusted_modules(("causalcache_lab", *extra))


def add_trust_module_argument(parser: argparse.ArgumentParser) -> None:
    """``--trust-module MODULE`` (repeatable) on a lab command whose config file names factories."""
    parser.add_argument(
        "--trust-module",
        action="append",
        default=[],
        metavar="MODULE",
        help="let the config's factories name MODULE (and its submodules): a factory runs code, so trust "
        "the config as code; the project's own modules need no flag (also: CAUSALCACHE_TRUSTED_MODULES)",
    )
