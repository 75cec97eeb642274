"""The reading rules of the external-style policies, on hand-built screens and through a prompt."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from causalcache_lab.worlds_ext import generate_ext_tasks
from causalcache_lab.worlds_ext.expert import play
from causalcache_lab.worlds_ext.policies import (
    VALUE_PATTERNS,
    FirstMatchPolicy,
    NoisyPolicy,
    SameLinePolicy,
    policy,
)
from causalcache_lab.worlds_ext.screen import Element, Screen, render
from causalcache_memory.errors import PolicyError


def _screen(rows: list[list[str]], item: str = "Ruby Savings") -> Screen:
    """One row per list; the cells of a row side by side; the item as the heading."""
    els = [Element("heading", item, (10, 10, 200, 20))]
    for r, cells in enumerate(rows):
        y = 30 + 14 * r
        els += [Element("text", c, (10 + 150 * k, y, 150 + 150 * k, y + 12)) for k, c in enumerate(cells)]
    return Screen("desktop", (640, 400), tuple(els), "Bank", item)


SAME_ROW = _screen([["Balance", "$1,200.00"], ["Available", "$950.10"]])
TWO_ROW = _screen([["Balance"], ["$1,200.00"], ["Available"], ["$950.10"]])
INLINE = _screen([["Balance: $1,200.00"], ["Available: $950.10"]])
RNG = random.Random(0)


def test_same_line_reads_only_a_value_on_the_labels_row():
    read = SameLinePolicy().read_screen
    assert read(SAME_ROW, "Ruby Savings", "Available", "money", False, RNG) == "$950.10"
    assert read(INLINE, "Ruby Savings", "Available", "money", False, RNG) == "$950.10"
    assert read(TWO_ROW, "Ruby Savings", "Available", "money", False, RNG) is None  # label above value
    assert read(SAME_ROW, "Oak Checking", "Available", "money", False, RNG) is None  # another item's screen


def test_first_match_reads_the_first_value_of_the_kind_whatever_its_label():
    read = FirstMatchPolicy().read_screen
    assert read(SAME_ROW, "Ruby Savings", "Available", "money", False, RNG) == "$1,200.00"  # the Balance
    assert read(SAME_ROW, "Ruby Savings", "Balance", "money", False, RNG) == "$1,200.00"
    assert read(TWO_ROW, "Ruby Savings", "Available", "money", False, RNG) == "$1,200.00"
    assert read(SAME_ROW, "Ruby Savings", "Routing", "ref", False, RNG) is None  # no value of that kind


def test_noisy_reaches_the_next_row_and_misreads_more_on_dense_history_images():
    p = NoisyPolicy()
    reads = [
        p.read_screen(TWO_ROW, "Ruby Savings", "Available", "money", False, random.Random(s))
        for s in range(400)
    ]
    assert all(r is not None and len(r) == len("$950.10") for r in reads)
    wrong = sum(r != "$950.10" for r in reads) / len(reads)
    dense = _screen([["Available", "$950.10"]] + [["Filler", f"row {k}"] for k in range(200)])
    dense_reads = [
        p.read_screen(dense, "Ruby Savings", "Available", "money", True, random.Random(s)) for s in range(400)
    ]
    dense_wrong = sum(r != "$950.10" for r in dense_reads) / len(dense_reads)
    assert NoisyPolicy.misread_rate(TWO_ROW, False) < NoisyPolicy.misread_rate(dense, True)
    assert wrong < 0.08 < dense_wrong  # ~0.03 against ~0.26


@dataclass
class _Ref:
    role: str
    sha256: str
    event_index: int | None = None


@dataclass
class _Msg:
    text: str


@dataclass
class _Prompt:
    messages: list[_Msg]
    images: list[_Ref]


def _prompt(task, screens, t: int, history: list[int]) -> _Prompt:
    """The prompt at decision ``t``: goal, ``t - 1`` summaries, the history events and the current screen."""
    summaries = [f"{j}. step {j}" for j in range(1, t)]
    refs = [_Ref("history", render(screens[j])[1], j) for j in history]
    refs.append(_Ref("current", render(screens[t - 1])[1]))
    return _Prompt([_Msg("system"), _Msg("\n".join([f"Task: {task.goal}", *summaries]))], refs)


@pytest.mark.parametrize("name", ["same-line", "first-match", "noisy"])
def test_a_policy_types_the_value_only_when_the_evidence_screen_is_in_its_prompt(name):
    task = next(t for t in generate_ext_tasks("mobile", 8, 2) if t.split == "memory_critical")
    screens = play(task).screens
    n, e = task.use_event, task.evidence_event
    pol = policy(name, seed=0)
    recent = list(range(n - 4, n))
    without, _ = pol.decide(_prompt(task, screens, n, recent))  # type: ignore[arg-type]
    with_it, where = pol.decide(_prompt(task, screens, n, [e, *recent[1:]]))  # type: ignore[arg-type]
    assert without.type == with_it.type == "type"
    assert without.text != task.needed_value  # a guess of the right kind
    if name == "first-match":
        # reads the first value of the kind below the item: right only when the needed field comes first
        pattern = VALUE_PATTERNS[task.need.kind]
        first = next(
            v for _, v in task.app(task.need.app).item(task.need.item).fields if pattern.fullmatch(v)
        )
        assert with_it.text == first and where == e
    elif name == "same-line":
        assert with_it.text == task.needed_value and where == e  # mobile cards: label and value on one row
    else:
        assert with_it.text is not None and len(with_it.text) == len(task.needed_value) and where == e


def test_navigation_follows_the_plan_and_is_deterministic():
    task = generate_ext_tasks("desktop", 2, 4)[1]
    screens = play(task).screens
    pol = policy("noisy", seed=3)
    for t in range(1, len(task.steps) + 1):
        a, _ = pol.decide(_prompt(task, screens, t, list(range(max(1, t - 4), t))))  # type: ignore[arg-type]
        b, _ = pol.decide(_prompt(task, screens, t, list(range(max(1, t - 4), t))))  # type: ignore[arg-type]
        assert a == b
        step = task.steps[t - 1]
        assert (
            a.type
            == {"open_app": "open_app", "click": "click", "type": "type", "done": "done", "scroll": "scroll"}[
                step.op
            ]
        )


def test_unknown_policy_and_foreign_prompts_are_refused():
    with pytest.raises(PolicyError, match="same-line, first-match, noisy"):
        policy("greedy")
    foreign = _Prompt([_Msg("system"), _Msg("Task: Buy milk")], [_Ref("current", "0" * 64)])
    with pytest.raises(PolicyError, match="worlds_ext"):
        policy("noisy").decide(foreign)  # type: ignore[arg-type]
