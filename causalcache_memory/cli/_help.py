"""One way for a subcommand to show its module docstring as its ``--help`` description, in plain text."""

from __future__ import annotations

import argparse
import re

__all__ = ["documented_parser", "plain_help", "plain_text"]

#: a Sphinx cross-reference, ``:role:`target``` or ``:role:`~pkg.mod.Name``` (shown as ``Name``)
_ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")
#: reStructuredText inline literal (double back-ticks)
_LITERAL = re.compile(r"``([^`]+)``")


def plain_text(text: str) -> str:
    """``text`` without Sphinx/reST markup: cross-references become their target (``~`` keeps the last
    dotted name), double back-tick literals their content. What a terminal shows for ``--help``."""

    def role(match: re.Match[str]) -> str:
        target = match.group(2)
        return target.rsplit(".", 1)[-1] if match.group(1) else target

    return _LITERAL.sub(r"\1", _ROLE.sub(role, text))


def plain_help(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Rewrite ``parser``'s description, epilog and every argument's and subcommand's help (recursively)
    as :func:`plain_text`; returns ``parser``."""
    for attr in ("description", "epilog"):
        if getattr(parser, attr):
            setattr(parser, attr, plain_text(getattr(parser, attr)))
    for action in parser._actions:
        if isinstance(action.help, str):
            action.help = plain_text(action.help)
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                if isinstance(choice.help, str):
                    choice.help = plain_text(choice.help)
            for sub in dict.fromkeys(action.choices.values()):
                plain_help(sub)
    return parser


def documented_parser(
    subparsers: argparse._SubParsersAction, name: str, *, help: str, doc: str | None
) -> argparse.ArgumentParser:
    """``subparsers.add_parser(name)`` whose description is ``doc`` after its first paragraph (the
    module docstring's usage and details), line breaks kept, markup removed (:func:`plain_text`)."""
    description = doc.split("\n\n", 1)[1] if doc and "\n\n" in doc else doc
    return subparsers.add_parser(
        name,
        help=plain_text(help),
        description=plain_text(description) if description else description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
