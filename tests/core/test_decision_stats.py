"""The idle-allocator rule, decision counts and the logging of decisions (causalcache_memory.decisions.stats)."""

from __future__ import annotations

import logging
import re
import threading
import time
import warnings

import pytest
from decision_runs import run

from causalcache_memory import Action, Generation, Trace, make_allocation
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.config import parse_config
from causalcache_memory.controller import MemoryController
from causalcache_memory.decisions.stats import DecisionMonitor, DecisionStats, fallback_kind
from causalcache_memory.errors import CausalCacheWarning, ConfigError
from causalcache_memory.factory import build_controller


class TypePolicy:
    name = "fake"

    def generate(self, prompt) -> Generation:
        return Generation(response="Action: type 42", action=Action("type", text="42"))


class ScriptedAllocator:
    """Swaps event 1 in, or declines with ``fallback`` reason, by decision index ``t``."""

    name = "scripted"
    uses_witness = True

    def __init__(self, declines) -> None:
        self.declines = declines  # t -> reason (None = swap)

    def allocate(self, ctx: AllocationContext):
        recent = list(RecentAllocator().allocate(ctx).selected)
        reason = self.declines(ctx.t)
        if reason is None and recent and 1 not in recent:
            recent[0] = 1
            return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name)
        info = {"fallback": reason} if reason else {}
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name, info=info)


class SlowAllocator:
    """Blocks until released (not a fixed sleep: a loaded machine must not let the call finish early)."""

    name = "slow"
    uses_witness = True

    def __init__(self) -> None:
        self.release = threading.Event()
        self.started = threading.Event()

    def allocate(self, ctx):
        self.started.set()
        self.release.wait(10.0)
        return RecentAllocator().allocate(ctx)


def idle_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "fell back to Recent-B on" in str(w.message)]


def test_warns_once_with_the_rate_and_main_reason_when_fallbacks_exceed_the_share(archive) -> None:
    # B = 2: decisions t >= 4 could swap; every one of them declines as out of distribution
    allocator = ScriptedAllocator(lambda t: "ood")
    ctl = MemoryController(policy=TypePolicy(), archive=archive, allocator=allocator, budget=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(ctl, archive, 22)  # t = 4..22: 19 decisions that could swap, one short of the window
        assert idle_warnings(caught) == [] and ctl.monitor.warned is None
        run(ctl, archive, 30, episode="ep2")  # more threads of the same memory: warned once, not again
    (message,) = idle_warnings(caught)
    assert "20 of the last 20 decisions" in message and "(100%" in message and "50% limit" in message
    assert "main reason: 'ood' (20 of them)" in message
    assert "docs/SELECTOR.md#when-the-selector-is-idle" in message and "docs/DATA.md#pipeline" in message
    assert ctl.monitor.warned == message


def test_no_warning_at_or_below_the_share(archive) -> None:
    allocator = ScriptedAllocator(lambda t: "ood" if t % 2 else None)  # half of them: 50% is not > 50%
    ctl = MemoryController(policy=TypePolicy(), archive=archive, allocator=allocator, budget=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalCacheWarning)
        records = run(ctl, archive, 39)
    assert ctl.monitor.warned is None
    assert sum(r["fallback"] == "ood" for r in records) == 20  # odd t: every 20-window holds exactly 10


def test_decisions_that_cannot_swap_do_not_count(archive) -> None:
    # B = 8 and t <= 9: Recent-B holds every past event; an allocator declining them is not idle
    allocator = ScriptedAllocator(lambda t: "ood")
    monitor = DecisionMonitor(window=3, max_fallback_share=0.0)
    ctl = MemoryController(
        policy=TypePolicy(), archive=archive, allocator=allocator, budget=8, monitor=monitor
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalCacheWarning)
        run(ctl, archive, 9)
    assert monitor.stats()["ep"].could_swap == 0 and monitor.warned is None
    with pytest.warns(CausalCacheWarning, match=r"3 of the last 3 decisions.*main reason: 'ood'"):
        run(ctl, archive, 12, episode="long")  # t = 10, 11, 12 could swap


def test_main_reason_is_the_most_frequent_kind(archive) -> None:
    allocator = ScriptedAllocator(lambda t: "ood" if t % 3 else "custom_reason")
    monitor = DecisionMonitor(window=6, max_fallback_share=0.5)
    ctl = MemoryController(
        policy=TypePolicy(), archive=archive, allocator=allocator, budget=2, monitor=monitor
    )
    with pytest.warns(CausalCacheWarning) as caught:
        run(ctl, archive, 9)  # t = 4..9 could swap: 4 x ood, 2 x custom_reason
    (message,) = idle_warnings(caught)
    assert "6 of the last 6 decisions" in message and "main reason: 'ood' (4 of them)" in message
    assert monitor.stats()["ep"].fallbacks == {"ood": 6, "custom_reason": 3}  # t = 1..9


def test_one_in_three_fallbacks_stays_below_the_default_share(archive) -> None:
    allocator = ScriptedAllocator(lambda t: "ood" if t % 3 == 0 else None)
    ctl = MemoryController(policy=TypePolicy(), archive=archive, allocator=allocator, budget=2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalCacheWarning)
        run(ctl, archive, 39)
    assert ctl.monitor.stats()["ep"].fallbacks == {"ood": 13} and ctl.monitor.warned is None


class BrokenAllocator:
    name = "broken"
    uses_witness = True

    def __init__(self, exc: Exception) -> None:
        self.exc = exc

    def allocate(self, ctx):
        raise self.exc


def test_the_controllers_fallback_reasons_get_short_kinds(archive) -> None:
    from causalcache_memory.selector.onnx_scorer import NonFiniteScoreError

    kinds = []
    trace = Trace("g", episode_id="ep")
    trace.observe(archive.shots[0])
    for i in range(1, 6):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", archive.shots[i])
    for allocator, timeout in [
        (BrokenAllocator(RuntimeError("model file missing")), 1.0),
        (BrokenAllocator(NonFiniteScoreError("2 NaN scores")), 1.0),
        (SlowAllocator(), 0.01),
    ]:
        ctl = MemoryController(
            policy=TypePolicy(), archive=archive, allocator=allocator, budget=2, selector_timeout_s=timeout
        )
        with pytest.warns(CausalCacheWarning, match="falling back to Recent-B"):
            kinds.append(fallback_kind(ctl.decide(trace).fallback))
            if isinstance(allocator, SlowAllocator):  # the first call is still running: busy
                assert allocator.started.wait(10.0)  # on a loaded machine it may not have begun yet
                time.sleep(0.05)  # and has now run past its 0.01 s limit: the worker is stuck on it
                kinds.append(fallback_kind(ctl.decide(trace).fallback))
                allocator.release.set()
        ctl.close()
    assert kinds == ["error", "non_finite", "timeout", "busy"]
    assert fallback_kind(None) is None and fallback_kind("ood") == "ood"


def test_the_bundled_selector_on_out_of_distribution_states_warns_once(archive) -> None:
    from causalcache_memory.selector import SelectorAllocator
    from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

    # every state is farther than the (shrunk) threshold of the model's guard, judging every decision
    selector = SelectorAllocator(ood_scale=1e-9, **GUARD_BEFORE_TRY2)
    config = parse_config({"budget": 2, "allocation": {"idle_warning": {"window": 5}}})
    ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=selector)
    ctl.selector_timeout_s = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = run(ctl, archive, 15)
    assert [r["fallback"] for r in records[3:]] == ["ood"] * 12
    (message,) = idle_warnings(caught)
    assert "5 of the last 5 decisions" in message and "main reason: 'ood'" in message
    assert ctl.monitor.window == 5


def test_the_default_guard_declines_only_after_its_refit_then_warns_once(archive) -> None:
    """Guard try 2 (the default; a short warm-up here): no covariate guard before the refit, then the
    refitted guard (its threshold shrunk to nothing) declines every state, and the idle rule speaks."""
    from causalcache_memory.selector import SelectorAllocator

    selector = SelectorAllocator(ood_scale=1e-9, ood_refit=30)
    config = parse_config({"budget": 2, "allocation": {"idle_warning": {"window": 5}}})
    ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=selector)
    ctl.selector_timeout_s = None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        records = run(ctl, archive, 39)
    could = records[3:]  # t >= 4: a swap is possible at B = 2
    assert [r["fallback"] for r in could[:29]] == [None] * 29  # the warm-up: the witness check only
    assert [r["fallback"] for r in could[29:]] == ["ood"] * (len(could) - 29)
    assert [r.get("ood_refit") for r in could[28:30]] == ["warmup", "refit"]
    (message,) = idle_warnings(caught)
    assert "main reason: 'ood'" in message and "far from this memory's own first decisions" in message


def test_counts_match_the_records(archive) -> None:
    allocator = ScriptedAllocator(lambda t: "ood" if t % 4 == 0 else None)
    ctl = MemoryController(policy=TypePolicy(), archive=archive, allocator=allocator, budget=2)
    records = run(ctl, archive, 12)
    live = ctl.monitor.stats()["ep"]
    assert live == DecisionStats.from_records(records)
    # t = 5, 6, 7, 9, 10, 11 swap event 1 in (two passes each); t = 4, 8, 12 decline as "ood"
    assert (live.decisions, live.could_swap, live.swaps, live.second_passes) == (12, 9, 6, 6)
    assert live.fallbacks == {"ood": 3}
    assert live.to_dict()["fallbacks"] == {"ood": 3}


def test_every_decision_is_logged_at_debug_and_the_warning_at_warning(archive, caplog) -> None:
    allocator = ScriptedAllocator(lambda t: "ood")
    monitor = DecisionMonitor(window=2)
    ctl = MemoryController(
        policy=TypePolicy(), archive=archive, allocator=allocator, budget=2, monitor=monitor
    )
    caplog.set_level(logging.DEBUG, logger="causalcache_memory")
    with pytest.warns(CausalCacheWarning):
        run(ctl, archive, 6)
    ours = [r for r in caplog.records if r.name.startswith("causalcache_memory.")]
    debug = [r.getMessage() for r in ours if r.levelno == logging.DEBUG]
    assert len(debug) == 6 and "ep t=5: allocator=scripted k=0 second_pass=False fallback=ood" in debug
    (warning,) = [r for r in ours if r.levelno == logging.WARNING]
    assert "main reason: 'ood'" in warning.getMessage() and warning.getMessage() == monitor.warned


@pytest.mark.parametrize(
    ("section", "fragments"),
    [
        ({"window": 0}, ["allocation.idle_warning.window: got 0", "window: 20"]),
        ({"window": True}, ["allocation.idle_warning.window: got true", "boolean"]),
        (
            {"max_fallback_share": 1.5},
            ["allocation.idle_warning.max_fallback_share: got 1.5", "enabled: false"],
        ),
        ({"max_fallback_share": -0.1}, ["max_fallback_share: got -0.1", "[0, 1)"]),
        ({"threshold": 0.5}, ["allocation.idle_warning.threshold: unknown key", "max_fallback_share"]),
    ],
)
def test_idle_warning_config_errors_name_the_field_value_and_fix(section, fragments) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"allocation": {"idle_warning": section}})
    for fragment in fragments:
        assert fragment in str(info.value)


def test_idle_warning_config_reaches_the_controller(archive) -> None:
    config = parse_config({"allocation": {"idle_warning": {"window": 7, "max_fallback_share": 0.25}}})
    ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=RecentAllocator())
    assert (ctl.monitor.window, ctl.monitor.max_fallback_share, ctl.monitor.enabled) == (7, 0.25, True)
    off = parse_config({"allocation": {"idle_warning": {"enabled": False}}})
    allocator = ScriptedAllocator(lambda t: "ood")
    ctl = build_controller(off, policy=TypePolicy(), archive=archive, allocator=allocator)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CausalCacheWarning)
        run(ctl, archive, 30)
    assert ctl.monitor.warned is None and ctl.monitor.stats()["ep"].fallbacks == {"ood": 30}


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [({"window": 0}, "window=0 must be an integer >= 1"), ({"max_fallback_share": 1.0}, "enabled=False")],
)
def test_monitor_arguments_are_checked(kwargs, fragment) -> None:
    with pytest.raises(ConfigError, match=re.escape(fragment)):
        DecisionMonitor(**kwargs)


class NeverSwaps:
    """Runs on every decision and keeps Recent-B without a fallback (a threshold never cleared)."""

    uses_witness = True

    def __init__(self, name: str = "selector") -> None:
        self.name = name

    def allocate(self, ctx: AllocationContext):
        recent = list(RecentAllocator().allocate(ctx).selected)
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name)


def test_a_selector_that_never_swaps_warns_once_after_the_window(archive) -> None:
    monitor = DecisionMonitor(window=3, no_swap_window=10)
    ctl = MemoryController(
        policy=TypePolicy(), archive=archive, allocator=NeverSwaps(), budget=2, monitor=monitor
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(ctl, archive, 12)  # t = 4..12: 9 decisions that could swap, one short of the window
        assert [w for w in caught if "swapped on none" in str(w.message)] == []
        run(ctl, archive, 20, episode="ep2")  # the memory's 10th could-swap decision: warned once
    (message,) = [str(w.message) for w in caught if "swapped on none" in str(w.message)]
    assert "'selector' swapped on none of the 10 decisions where a swap was possible" in message
    assert "second_pass_share" in message and "docs/SELECTOR.md#when-the-selector-is-idle" in message
    assert monitor.warned == message and monitor.stats()["ep2"].fallbacks == {}


def test_one_swap_or_the_recent_allocator_never_trigger_the_no_swap_warning(archive) -> None:
    swaps_once = ScriptedAllocator(lambda t: None if t == 5 else "")  # one swap at t = 5, then Recent-B
    for allocator in (swaps_once, NeverSwaps(name="recent")):
        monitor = DecisionMonitor(window=3, no_swap_window=5)
        ctl = MemoryController(
            policy=TypePolicy(), archive=archive, allocator=allocator, budget=2, monitor=monitor
        )
        with warnings.catch_warnings():
            warnings.simplefilter("error", CausalCacheWarning)
            run(ctl, archive, 30)
        assert monitor.warned is None
    assert DecisionMonitor(no_swap_window=None).no_swap_window is None


def test_no_swap_window_is_configured_and_checked(archive) -> None:
    config = parse_config({"allocation": {"idle_warning": {"no_swap_window": 50}}})
    ctl = build_controller(config, policy=TypePolicy(), archive=archive, allocator=RecentAllocator())
    assert ctl.monitor.no_swap_window == 50
    assert (
        parse_config(
            {"allocation": {"idle_warning": {"no_swap_window": None}}}
        ).allocation.idle_warning.no_swap_window
        is None
    )
    with pytest.raises(ConfigError, match=r"allocation.idle_warning.no_swap_window: got 0"):
        parse_config({"allocation": {"idle_warning": {"no_swap_window": 0}}})
    with pytest.raises(ConfigError, match=re.escape("no_swap_window=0 must be an integer >= 1 or None")):
        DecisionMonitor(no_swap_window=0)
