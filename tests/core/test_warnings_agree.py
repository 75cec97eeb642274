"""Every warning a memory can give, over the scenarios that trigger them, never contradicts another
(issue 51 item 2's done-when): the budget-0 warning, the idle warning (guard, time-outs, errors), the
never-swaps warning, the missing-text warning (with and without OCR configured), the per-step fallback
warnings and the pilot summary at close(). Each scenario collects what one memory says; the rules below
are checked on every pair."""

from __future__ import annotations

import itertools
import time
import warnings

import pytest
from decision_runs import run

from causalcache_memory import Action, Generation, make_allocation
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.config import parse_config
from causalcache_memory.factory import build_controller
from causalcache_memory.selector import SelectorAllocator

ADD_TEXT = "return `screen_text`"
CONFIGURE_OCR = "let the memory OCR the screenshots"
TEXT_FAR = "The screen text is being read"
GUARD_OPTIONS = ("causalcache learn", "ood_scale")
IDLE = ("fell back to Recent-B", "swapped on none of", "(a pilot)")


class TypePolicy:
    name = "fake"

    def generate(self, prompt) -> Generation:
        return Generation(response="Action: type 42", action=Action("type", text="42"))


class Scripted:
    """Recent-B with the record facts of a selector: ``fallback`` (e.g. ``ood``), ``ood_group``,
    ``masked``; ``sleep_s`` before answering, ``fail`` raises."""

    uses_witness = True

    def __init__(self, name="selector", *, fallback=None, group=None, masked=None, sleep_s=0.0, fail=False):
        self.name, self.fallback, self.group, self.masked = name, fallback, group, masked
        self.sleep_s, self.fail = sleep_s, fail

    def allocate(self, ctx: AllocationContext):
        if self.fail:
            raise RuntimeError("broken allocator")
        time.sleep(self.sleep_s)
        recent = list(RecentAllocator().allocate(ctx).selected)
        info = {}
        if len(recent) < ctx.t - 1:
            info = {"min_gain": 0.04, "top_gain": 0.0}
            if self.fallback:
                info.update({"fallback": self.fallback, **({"ood_group": self.group} if self.group else {})})
            if self.masked:
                info["masked"] = self.masked
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name, info=info)


def said(
    archive, allocator, *, budget=2, steps=12, timeout_ms=None, ocr="none", close=True, **idle
) -> list[str]:
    """Every CausalCacheWarning of one memory built with ``allocator`` over ``steps`` decisions."""
    section = {"window": 5, "no_swap_window": None, "missing_text_share": 0.5, **idle}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = parse_config(
            {"budget": budget, "allocation": {"idle_warning": section}, "archive": {"ocr": {"engine": ocr}}}
        )
        ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=allocator)
        ctl.selector_timeout_s = None if timeout_ms is None else timeout_ms / 1000
        run(ctl, archive, steps)
        if close:
            ctl.close()
    return [str(w.message) for w in caught if "causalcache" in w.category.__module__]


def contradictions(messages: list[str]) -> list[str]:
    """The rules, on every pair (a message with itself too: one warning may not contradict itself)."""
    found = []
    for a, b in itertools.product(messages, repeat=2):
        if TEXT_FAR in a and ADD_TEXT in b and "Where screen text is given" not in a:
            found.append(f"text is read and far vs add screen_text: {a[:80]!r} / {b[:80]!r}")
        if "budget: 0 shows no past screenshot" in a and any(x in b for x in IDLE):
            found.append(
                f"budget 0 has nothing to select, yet an idle warning tunes the selector: {b[:120]!r}"
            )
        if "OCR is configured" in a and CONFIGURE_OCR in b:
            found.append("OCR configured vs configure OCR")
        if "did not answer in time" in a and any(o in a for o in GUARD_OPTIONS):
            found.append("a time-out sent to the guard")
        if "out-of-distribution guard" in a and "timeout_ms" in a:
            found.append("a guard decline sent to the time limit")
        if "the allocator 'recent' fell back" in a and "allocation.allocator: recent" in b:
            found.append("a memory on the recent allocator told to use the recent allocator")
        if "the allocator 'rgb' failed" in a and "selector.model_path" in b:
            found.append("a non-selector allocator sent to the selector's model file")
    for m in messages:  # options, where given, always in the same order
        order = [
            m.index(o) for o in ("causalcache learn", "ood_scale", "allocation.allocator: recent") if o in m
        ]
        if order != sorted(order):
            found.append(f"options out of order: {m[:120]!r}")
    return found


@pytest.fixture
def scenarios(archive):
    """name -> (messages, what must have been said)."""
    return {
        "guard, text far, text missing": (
            said(archive, Scripted(fallback="ood", group="text", masked="text")),
            ("fell back to Recent-B", ADD_TEXT),
        ),
        "guard, position far, OCR configured but text missing": (
            said(archive, Scripted(fallback="ood", group="position", masked="text"), ocr="tesseract"),
            ("fell back to Recent-B", "OCR is configured (archive.ocr.engine: tesseract)"),
        ),
        "time-outs": (
            said(archive, Scripted(sleep_s=0.05), timeout_ms=5, steps=10),
            ("exceeded 5 ms", "did not answer in time"),
        ),
        "a failing rgb allocator": (
            said(archive, Scripted("rgb", fail=True), steps=10),
            ("failed: RuntimeError", "the allocator 'rgb' failed"),
        ),
        "never swaps, text missing": (
            said(archive, Scripted(masked="text"), no_swap_window=6, steps=12),
            ("swapped on none of", ADD_TEXT),
        ),
        "a pilot": (
            said(archive, Scripted(fallback="ood", group="text"), window=20, steps=10),
            ("(a pilot)", TEXT_FAR),
        ),
        "budget 0 with the selector": (
            said(archive, SelectorAllocator(), budget=0, steps=14, no_swap_window=6),
            ("budget: 0 shows no past screenshot",),
        ),
    }


def test_no_warning_of_any_scenario_contradicts_another(scenarios) -> None:
    for name, (messages, expected) in scenarios.items():
        for text in expected:  # the scenario did trigger what it is for
            assert any(text in m for m in messages), (name, text, messages)
        assert contradictions(messages) == [], (name, messages)


def test_budget_0_with_the_selector_says_only_that(archive) -> None:
    """At B = 0 nothing can be swapped in: the guard's declines, the missing text and the lack of swaps are
    not the problem, so only the config's warning speaks (before the fix, the idle warning advised a guard
    refit and the missing-text warning screen text, for a memory that can show no screenshot)."""
    messages = said(archive, SelectorAllocator(), budget=0, steps=14, no_swap_window=6)
    assert len(messages) == 1 and messages[0].startswith("budget: 0 shows no past screenshot")
    assert not any(x in messages[0] for x in (*GUARD_OPTIONS, ADD_TEXT))


def test_the_rules_see_a_contradiction() -> None:
    """The checker is not silent by construction: each rule fires on a pair that breaks it."""
    assert contradictions([f"{TEXT_FAR}: ...", f"Fix: {ADD_TEXT} ..."])
    assert contradictions(
        ["budget: 0 shows no past screenshot ...", "the allocator fell back to Recent-B ..."]
    )
    assert contradictions(["OCR is configured (...)", f"Fix: ..., or {CONFIGURE_OCR} ..."])
    assert contradictions(["the allocator 'rgb' failed ...", "fix allocation.selector.model_path"])
    assert contradictions(["(3) allocation.allocator: recent ... (1) causalcache learn"])
    assert contradictions(["the allocator 'recent' fell back ...; or allocation.allocator: recent."])
