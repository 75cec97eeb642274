"""Invariants of the sealed generator (``terminal``) and policy (``title-line``) -- no evaluation runs them.

These check structure only (determinism, the expert solves every task, where the evidence sits, the
text format, that the evidence screen is readable, the reading rule on hand-built screens); no
allocator, selector or closed loop touches them before the final table (docs/sealed/generators-v1.yaml).
"""

from __future__ import annotations

import random

import pytest

from causalcache_lab.worlds_ext import generate_ext_tasks, generator
from causalcache_lab.worlds_ext.expert import play
from causalcache_lab.worlds_ext.harness import ExtEvalSettings
from causalcache_lab.worlds_ext.policies import TitleLinePolicy, policy
from causalcache_lab.worlds_ext.screen import Element, Screen
from causalcache_memory.errors import ConfigError


@pytest.fixture(scope="module")
def plays():
    return [(t, play(t)) for t in generate_ext_tasks("terminal", 8, 4)]


def test_the_harness_refuses_the_sealed_generator_and_policy_without_the_flag():
    with pytest.raises(ConfigError, match="terminal is sealed as a whole"):
        ExtEvalSettings("terminal", "noisy")
    with pytest.raises(ConfigError, match="title-line is sealed as a whole"):
        ExtEvalSettings("desktop", "title-line")
    ExtEvalSettings("terminal", "title-line", sealed=True)


def test_terminal_tasks_are_deterministic_and_solved_by_the_expert(plays):
    again = generate_ext_tasks("terminal", 8, 4)
    assert [t.goal for t, _ in plays] == [t.goal for t in again]
    for task, p in plays:
        assert task.check(p.world.state()), task.goal


def test_terminal_memory_critical_evidence_sits_outside_recent4(plays):
    for task, p in plays:
        if task.split != "memory_critical":
            continue
        shown = [j for j, s in enumerate(p.screens) if any(task.needed_value in e.text for e in s.elements)]
        assert task.evidence_event in shown
        assert all(j < task.use_event - 4 for j in shown if j < task.use_event)


def test_terminal_text_is_an_80_by_24_buffer_with_box_drawing(plays):
    _, p = plays[0]
    text = generator("terminal").serialize(p.screens[2])
    lines = text.split("\n")
    assert len(lines) == 24 and max(len(x) for x in lines) <= 80
    assert lines[0].startswith("┌─ ") and lines[22].startswith("└") and lines[23].startswith("[0] ")


@pytest.mark.parametrize("name", ["same-line", "first-match", "noisy"])
def test_the_evidence_screen_is_readable_by_a_development_rule(plays, name):
    """Structure, not a run: a reader that sees the evidence screen can find a value of the needed kind."""
    pol = policy(name)
    reads = 0
    for task, p in plays:
        if task.need is None:
            continue
        screen = p.screens[task.evidence_event]
        got = pol.read_screen(screen, task.need.item, task.need.attr, task.need.kind, False, random.Random(0))
        reads += got is not None
    assert reads >= 1


def test_title_line_reads_only_screens_about_the_item():
    rows = [
        Element("text", "Ruby Savings", (0, 0, 80, 11)),
        Element("text", "balance:   $1,200.00", (0, 12, 200, 23)),
    ]
    about = Screen("terminal", (480, 288), tuple(rows), "Ledger", "Ruby Savings")
    mentions = Screen("terminal", (480, 288), tuple(rows), "Ledger", "Ledger")
    read = TitleLinePolicy().read_screen
    assert read(about, "Ruby Savings", "Balance", "money", False, random.Random(0)) == "$1,200.00"
    assert read(mentions, "Ruby Savings", "Balance", "money", False, random.Random(0)) is None
    assert read(about, "Ruby Savings", "Hold", "money", False, random.Random(0)) is None
