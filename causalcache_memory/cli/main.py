"""Entry point of the ``causalcache`` console script.

Each subcommand lives in its own module under ``causalcache_memory.cli`` exposing
``register(subparsers) -> None``; registering must stay cheap (no heavy imports). Handlers import what
they need when run and return an exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from causalcache_memory import __version__
from causalcache_memory.errors import CausalCacheError

__all__ = ["build_parser", "main"]

#: subcommand modules, in help order
COMMAND_MODULES = (
    "demo",
    "config_cmd",
    "bench",
    "train",
    "eval",
    "label",
    "learn",
    "archive_cmd",
    "data_cmd",
    "serve",
    "report",
    "compare",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="causalcache",
        description="CausalCache memory for GUI agents: budgeted fidelity restoration of past screenshots.",
    )
    parser.add_argument("--version", action="version", version=f"causalcache-memory {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(f"{__package__}.{name}")
        except ModuleNotFoundError as exc:
            if exc.name == f"{__package__}.{name}":
                continue  # subcommand not shipped in this build
            raise
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(args) or 0)
    except CausalCacheError as exc:
        print(f"causalcache: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("causalcache: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
