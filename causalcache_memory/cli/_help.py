"""One way for a subcommand to show its module docstring as its ``--help`` description."""

from __future__ import annotations

import argparse

__all__ = ["documented_parser"]


def documented_parser(
    subparsers: argparse._SubParsersAction, name: str, *, help: str, doc: str | None
) -> argparse.ArgumentParser:
    """``subparsers.add_parser(name)`` whose description is ``doc`` after its first paragraph (the
    module docstring's usage and details), kept as written."""
    return subparsers.add_parser(
        name,
        help=help,
        description=doc.split("\n\n", 1)[1] if doc and "\n\n" in doc else doc,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
