"""``--help`` in plain text (issue 51 item 4): no Sphinx roles or reST literals from module docstrings."""

from __future__ import annotations

import argparse
import re

from causalcache_memory.cli._help import plain_text
from causalcache_memory.cli.main import build_parser

MARKUP = re.compile(r":(?:py:)?[a-z]+:`|``")


def _parsers(parser: argparse.ArgumentParser, name: str = "causalcache"):
    yield name, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub_name, sub in action.choices.items():
                yield from _parsers(sub, f"{name} {sub_name}")


def test_plain_text_removes_roles_and_literals() -> None:
    text = "see :mod:`causalcache_memory.timeline_html` and :class:`~pkg.mod.DecisionStats`; ``k`` swaps"
    assert plain_text(text) == "see causalcache_memory.timeline_html and DecisionStats; k swaps"
    assert plain_text(":py:func:`~a.b.f` once") == "f once"
    assert plain_text("no markup, a `single` quote") == "no markup, a `single` quote"


def test_every_help_text_is_plain() -> None:
    found = {name: MARKUP.findall(p.format_help()) for name, p in _parsers(build_parser())}
    assert len(found) > 5  # the walk reached the subcommands
    assert {name: hits for name, hits in found.items() if hits} == {}


def test_a_documented_command_keeps_its_words() -> None:
    helps = dict(_parsers(build_parser()))
    report = helps["causalcache report"].format_help()
    assert "causalcache_memory.timeline_html" in report and "DecisionStats" in report
