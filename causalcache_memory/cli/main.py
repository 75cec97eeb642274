"""Entry point of the ``causalcache`` console script.

Each subcommand lives in its own module exposing ``register(subparsers) -> None``; registering must stay
cheap (no heavy imports). Handlers import what they need when run and return an exit code.

The library's own commands (what a deploying team runs: ``config``, ``archive``, ``serve``, ``report``)
are the modules of :data:`COMMAND_MODULES`. Other distributions add commands through the entry-point
group :data:`COMMAND_GROUP` (name = module path): the lab (``causalcache-lab``, in ``lab/``) registers
``demo``, ``learn``, ``train``, ``eval``, ``bench``, ``label``, ``compare`` and ``data``
there, so ``causalcache demo`` works once the lab is installed and the library never imports it.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from causalcache_memory import __version__
from causalcache_memory.cli._help import plain_help
from causalcache_memory.errors import CausalCacheError

__all__ = ["build_parser", "main"]

#: the library's subcommand modules, in help order
COMMAND_MODULES = ("config_cmd", "archive_cmd", "serve", "report")
#: entry-point group through which other distributions (the lab) add subcommand modules
COMMAND_GROUP = "causalcache.commands"
#: the lab's commands, named in the error when the lab is not installed
LAB_COMMANDS = ("bench", "compare", "data", "demo", "eval", "inspect", "label", "learn", "train")


def plugin_command_modules() -> list[str]:
    """Module paths of the commands other installed distributions register under :data:`COMMAND_GROUP`,
    sorted by entry-point name (the order they appear in ``--help``)."""
    from importlib.metadata import entry_points

    seen: dict[str, str] = {}
    for entry in entry_points(group=COMMAND_GROUP):
        seen.setdefault(entry.name, entry.value)
    return [seen[name] for name in sorted(seen)]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="causalcache",
        description="CausalCache memory for GUI agents: budgeted fidelity restoration of past screenshots.",
    )
    parser.add_argument("--version", action="version", version=f"causalcache-memory {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for path in [f"{__package__}.{name}" for name in COMMAND_MODULES] + plugin_command_modules():
        importlib.import_module(path).register(subparsers)
    return plain_help(parser)  # --help in plain text: no Sphinx markup from the modules' docstrings


def _registered(parser: argparse.ArgumentParser) -> set[str]:
    for action in parser._subparsers._group_actions if parser._subparsers else ():
        if isinstance(action, argparse._SubParsersAction):
            return set(action.choices)
    return set()


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in LAB_COMMANDS and words[0] not in _registered(parser):
        print(
            f"causalcache: error: '{words[0]}' is a command of the lab, which is not installed; from a "
            "checkout of the repository run `python -m pip install -e ./lab` (the README's quickstart "
            "installs it)",
            file=sys.stderr,
        )
        return 2
    args = parser.parse_args(words)
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
