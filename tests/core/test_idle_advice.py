"""Warnings that lead somewhere (issue 54 item 6, issue 51 item 2): the idle warning names the far feature
group and the options in order, a pilot-sized run is told at close(), and no warning contradicts another."""

from __future__ import annotations

import logging
import re
import warnings
from collections import Counter

import numpy as np
import pytest
from decision_runs import run

from causalcache_memory import Action, Generation, make_allocation
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.config import parse_config
from causalcache_memory.decisions.stats import PILOT_MIN_DECISIONS, DecisionMonitor
from causalcache_memory.factory import build_controller
from causalcache_memory.idle_advice import GROUP_WORDS, fallback_advice
from causalcache_memory.selector import SelectorAllocator
from causalcache_memory.selector.ood_explain import FEATURE_GROUPS, far_group, group_contributions
from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

ADD_TEXT = "return `screen_text`"  # the missing-text warning's fix
TEXT_IS_READ = "The screen text is being read"
TEXT_PARTIAL = "Where screen text is given, it is what is far"
OPTIONS = ("`causalcache learn`", "ood_scale", "allocation.allocator: recent")


class TypePolicy:
    name = "fake"

    def generate(self, prompt) -> Generation:
        return Generation(response="Action: type 42", action=Action("type", text="42"))


class OodAllocator:
    """Recent-B, declining every could-swap decision as ``ood`` with far group ``group``."""

    name = "selector"
    uses_witness = True

    def __init__(self, group: str | None = "text", masked: str | None = None) -> None:
        self.group, self.masked = group, masked

    def allocate(self, ctx: AllocationContext):
        recent = list(RecentAllocator().allocate(ctx).selected)
        info = {}
        if len(recent) < ctx.t - 1:
            info = {"fallback": "ood", **({"ood_group": self.group} if self.group else {})}
            if self.masked:
                info["masked"] = self.masked
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name, info=info)


def memory(archive, allocator, **idle):
    section = {"window": 20, "no_swap_window": None, **idle}
    config = parse_config({"budget": 2, "allocation": {"idle_warning": section}})
    ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=allocator)
    ctl.selector_timeout_s = None
    return ctl


def ours(caught) -> list[str]:
    return [str(w.message) for w in caught if "causalcache" in w.category.__module__]


def dump(i: int) -> str:
    """A dense screen: 24 lines, most holding a value that changes from screen to screen."""
    rows = [
        f"Invoice INV-{4100 + 7 * i + k} from Globex, Dec {10 + k} total ${100 + i + k}.00" for k in range(20)
    ]
    return "\n".join(["Inbox - Mail", "09:41", "Archive", "Search mail", *rows])


# ------------------------------------------------------------------ the far group
def test_the_far_group_is_the_group_that_moved() -> None:
    guard = SelectorAllocator().model.ood
    names = guard.features
    for group in ("text", "position", "action"):
        z = np.zeros(len(names))
        z[list(guard.columns)] = guard.center
        z[[i for i, n in enumerate(names) if n.endswith("_available")]] = 1.0  # every group available
        moved = [c for c in guard.columns if _group(names[c]) == group]
        z[moved[0]] += 40 * guard.scale[list(guard.columns).index(moved[0])]
        shares = group_contributions(guard, z)
        assert far_group(shares) == group and shares[group] > 0.5
        assert sum(shares.values()) == pytest.approx(1.0, abs=0.01)
        assert set(shares) <= set(FEATURE_GROUPS)


def _group(name: str) -> str:
    from causalcache_memory.selector.ood_explain import feature_group

    return feature_group(name)


def test_a_declined_record_names_its_far_group(archive) -> None:
    for i, sha in enumerate(archive.shots):
        archive.put_text(sha, dump(i))
    ctl = memory(
        archive, SelectorAllocator(**GUARD_BEFORE_TRY2), window=5
    )  # the model's guard, every decision
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = run(ctl, archive, 12)
    declined = [r for r in records if r.get("fallback") == "ood"]
    assert declined, "the dense dump is out of distribution for the bundle"
    assert all(
        r["ood_group"] in FEATURE_GROUPS and r["ood_group"] == far_group(r["ood_groups"]) for r in declined
    )
    (idle,) = [m for m in ours(caught) if "fell back to Recent-B" in m]
    top = Counter(r["ood_group"] for r in declined[-5:]).most_common(1)[0][0]
    assert GROUP_WORDS[top] in idle


# ------------------------------------------------------------------ the idle warning's advice
@pytest.mark.parametrize("group", ["text", "position", None])
def test_the_idle_warning_names_the_group_and_the_options_in_order(archive, group) -> None:
    ctl = memory(archive, OodAllocator(group), window=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(ctl, archive, 10)
    (message,) = ours(caught)
    assert "main reason: 'ood' (5 of them)" in message
    positions = [message.index(o) for o in OPTIONS]
    assert positions == sorted(positions)  # refit via learn, then ood_scale (with its risk), then recent
    assert "risk" in message[positions[1] :]
    assert ADD_TEXT not in message and "add screen text" not in message.lower()
    if group is None:
        assert "name no far feature group" in message
    else:
        assert f"group {group!r} on 5 of 5 declined" in message and GROUP_WORDS[group] in message
    assert (TEXT_IS_READ in message) == (group == "text")


def test_timeouts_are_not_sent_to_the_guard() -> None:
    advice = fallback_advice("timeout", Counter(), 5)
    assert "timeout_ms" in advice and "ood_scale" not in advice and "learn" not in advice


# ------------------------------------------------------------------ pilot-sized runs
def test_a_pilot_with_most_decisions_declined_is_warned_at_close(archive) -> None:
    ctl = memory(archive, OodAllocator("text"))  # window 20: four short trajectories never fill it
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(4):
            run(ctl, archive, 6, episode=f"pilot-{k}")  # B = 2: t = 4..6 could swap, 3 per trajectory
        assert ours(caught) == []
        ctl.close()
        ctl.close()  # idempotent: once
    (message,) = ours(caught)
    assert message.startswith("this memory's run: 12 decisions where a swap was possible, 0 swapped, 12 fell")
    assert "(a pilot)" in message and "group 'text' on 12 of 12 declined" in message
    assert message == ctl.monitor.warned == ctl.monitor.closed_summary
    # the pilot's advice is the idle warning's advice for the same counts
    assert fallback_advice("ood", Counter({"text": 12}), 12) in message


def test_a_pilot_that_selected_gets_a_summary_and_no_warning(archive, caplog) -> None:
    ctl = memory(archive, RecentAllocator())
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.INFO, "causalcache_memory"):
        warnings.simplefilter("always")
        run(ctl, archive, 8)
        ctl.close()
    assert ours(caught) == []
    assert "this memory's run: 5 decisions where a swap was possible, 0 swapped, 0 fell back" in caplog.text


def test_too_short_a_pilot_or_a_finalizer_says_nothing(archive) -> None:
    short = memory(archive, OodAllocator("text"))
    closed = memory(archive, OodAllocator("text"))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(short, archive, 2 + PILOT_MIN_DECISIONS)  # one short of the pilot minimum
        short.close()
        run(closed, archive, 10)
        closed.close(wait=False)  # what a finalizer calls
    assert ours(caught) == []
    assert closed.monitor.closed_summary is None


# ------------------------------------------------------------------ no warning contradicts another
def _check_consistent(messages: list[str]) -> None:
    says_text_is_read = any(TEXT_IS_READ in m for m in messages)
    says_add_text = any(ADD_TEXT in m for m in messages)
    assert not (says_text_is_read and says_add_text), messages
    for m in messages:  # every message giving options gives them in the same order
        found = [m.index(o) for o in OPTIONS if o in m]
        assert found == sorted(found), m
    advice = {re.sub(r"\d+", "N", m[m.index("Options") :]) for m in messages if "Options, in order" in m}
    assert len({a.split(" See ")[0] for a in advice}) <= 1, advice


@pytest.mark.parametrize(
    ("group", "masked"),
    [("text", None), ("position", "app+text"), ("app", "text"), (None, "text"), ("text", "text")],
)
def test_no_warning_contradicts_another(archive, group, masked) -> None:
    ctl = memory(archive, OodAllocator(group, masked), window=5, missing_text_share=0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(ctl, archive, 12)
        ctl.close()
    messages = ours(caught)
    assert len(messages) == 1 + (masked is not None)  # the idle warning, and the missing-text one
    _check_consistent(messages)
    if group == "text":  # text far: said plainly, or only where it is given when it is also missing
        assert any((TEXT_PARTIAL if masked else TEXT_IS_READ) in m for m in messages)


def test_the_bundle_without_text_and_declining_is_not_told_its_text_is_far(archive) -> None:
    # no text stored; every state OOD for the model's guard judging every decision (the guard before try 2)
    ctl = memory(archive, SelectorAllocator(ood_scale=1e-9, **GUARD_BEFORE_TRY2), window=5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(ctl, archive, 12)
    messages = ours(caught)
    assert any(m.startswith("screen text was missing") for m in messages)
    idle = [m for m in messages if "fell back to Recent-B" in m]
    assert idle and "'text' on" not in idle[0]  # a masked group is never the far one
    _check_consistent(messages)


def test_after_the_refit_far_means_far_from_the_memorys_own_first_decisions() -> None:
    before, after = (fallback_advice("ood", Counter(position=5), 5, refitted=r) for r in (False, True))
    assert "far from the selector's training states" in before and "own first decisions" not in before
    assert "far from this memory's own first decisions" in after and "training states" not in after
    assert before[before.index("Options") :] == after[after.index("Options") :]  # the same options


def test_a_monitor_closes_once_without_decisions() -> None:
    monitor = DecisionMonitor()
    assert monitor.close() is None and monitor.closed_summary is None
