"""Micro-benchmarks of the per-step pieces (``make bench`` measures them; normal runs execute each once)."""

from __future__ import annotations

import itertools

import pytest

from causalcache_lab.bench.episode import GOAL, step_action, step_response
from causalcache_lab.bench.naive import NaiveMessageMemory
from causalcache_lab.bench.screens import screenshot_pool, unique_variant
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.render import render_prompt
from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2
from causalcache_memory.trace import Trace

SMALL_SCREEN = (320, 180)  # the CLI uses 1920x1080; the suite keeps normal runs fast

N_EVENTS = 200


@pytest.fixture(scope="module")
def pool() -> tuple[bytes, ...]:
    return screenshot_pool(3, SMALL_SCREEN)


@pytest.fixture
def trace_200(tmp_path, pool):
    archive = LocalArchive(tmp_path / "archive")
    trace = Trace(GOAL, episode_id="micro")
    trace.observe(archive.put(unique_variant(pool[0], 0)).sha256)
    for j in range(1, N_EVENTS + 1):
        action = step_action(j)
        trace.record(action, step_response(j, action), archive.put(unique_variant(pool[j % 3], j)).sha256)
    return trace, archive


def test_archive_put(benchmark, tmp_path, pool) -> None:
    archive = LocalArchive(tmp_path / "archive")
    counter = itertools.count()
    sha = benchmark(lambda: archive.put(unique_variant(pool[0], next(counter))).sha256)
    assert sha in archive


def test_render_bind_recent4_t200(benchmark, trace_200) -> None:
    trace, archive = trace_200
    allocation = RecentAllocator().allocate(AllocationContext(trace, 4, archive))
    bound = benchmark(lambda: render_prompt(trace, allocation).bind(archive))
    assert len(bound.images) == 5


def test_selector_allocate_t200(benchmark, trace_200, selector_model) -> None:
    from causalcache_memory.selector.allocator import SelectorAllocator

    trace, archive = trace_200
    selector = SelectorAllocator(selector_model, threads=1)
    ctx = AllocationContext(trace, 4, archive, witness=step_action(999))
    selector.allocate(ctx)  # warm the per-trace feature cache and thumbnails
    allocation = benchmark(selector.allocate, ctx)
    assert len(allocation.selected) == 4 and allocation.t == N_EVENTS + 1


def test_selector_full_decision_world_t200(benchmark, tmp_path, selector_model) -> None:
    """The whole decision (text features, guard, scorer, exact-B beam) on a 200-event world trace."""
    from causalcache_lab.bench.selector_world_latency import OOD_SCALE, world_trace
    from causalcache_memory.selector.allocator import SelectorAllocator

    archive = LocalArchive(tmp_path / "world")
    trace, witnesses = world_trace(N_EVENTS, archive)
    # the model's guard on every timed decision (the default's guard would not judge before its refit on 64
    # of a deployment's decisions, and these repeat one state): the costlier path, as measured before try 2
    selector = SelectorAllocator(
        selector_model, threads=1, min_gain=0.0, ood_scale=OOD_SCALE, **GUARD_BEFORE_TRY2
    )
    ctx = AllocationContext(trace, 4, archive, witness=witnesses[0])
    selector.allocate(ctx)  # warm the screen-text and feature caches
    allocation = benchmark(selector.allocate, ctx)
    assert "ood_distance" in allocation.info and allocation.info.get("fallback") is None  # reached the scorer
    assert "masked" not in allocation.info  # screen text (and app labels) read on this trace
    assert len(allocation.selected) == 4 and allocation.t == N_EVENTS + 1


@pytest.mark.parametrize("shadow", [False, True], ids=["compare", "compare_shadow"])
def test_compare_decision_world_t200(benchmark, tmp_path, selector_model, shadow) -> None:
    """One decision under ``allocation.compare`` (two selectors, one runs the episode); with ``shadow`` the
    other decides too, for ``causalcache compare``'s triggered analysis (BENCHMARKS.md section 17)."""
    from causalcache_lab.bench.selector_world_latency import OOD_SCALE, world_trace
    from causalcache_memory.allocation.explore import ExploringAllocator
    from causalcache_memory.selector.allocator import SelectorAllocator

    archive = LocalArchive(tmp_path / "world")
    trace, witnesses = world_trace(N_EVENTS, archive)
    make = lambda: SelectorAllocator(  # noqa: E731  (the model's guard on every decision, as above)
        selector_model, threads=1, min_gain=0.0, ood_scale=OOD_SCALE, **GUARD_BEFORE_TRY2
    )
    allocator = ExploringAllocator(make(), make(), share=0.5, shadow=shadow)
    ctx = AllocationContext(trace, 4, archive, witness=witnesses[0])
    allocator.allocate(ctx)  # warm both selectors' screen-text and feature caches
    allocation = benchmark(allocator.allocate, ctx)
    assert ("shadow_selected" in allocation.info) is shadow
    assert len(allocation.selected) == 4 and allocation.t == N_EVENTS + 1


@pytest.mark.parametrize("shadow", [False, True], ids=["plain", "shadow"])
def test_decision_monitor_observe(benchmark, shadow) -> None:
    """Counting one decision (``DecisionMonitor.observe``), with and without a shadow set to compare
    (BENCHMARKS.md section 17): what the per-thread shadow counts add to every step."""
    from causalcache_memory import Generation, make_allocation
    from causalcache_memory.controller import StepDecision
    from causalcache_memory.decisions.stats import DecisionMonitor

    info = {"shadow_selected": [150, 198, 199, 200]} if shadow else {}
    allocation = make_allocation(
        [197, 198, 199, 200], t=N_EVENTS + 1, budget=4, allocator="selector", info=info
    )
    decision = StepDecision(
        t=N_EVENTS + 1, generation=Generation(response="r", action=None), allocation=allocation
    )
    monitor = DecisionMonitor(no_swap_window=None)
    benchmark(monitor.observe, "thread-0", decision)
    stats = monitor.stats()["thread-0"]
    assert stats.shadow_disagreed == (stats.decisions if shadow else 0)


def test_naive_step_t200(benchmark, pool) -> None:
    pytest.importorskip("langchain_core")
    memory = NaiveMessageMemory(GOAL, past=4)
    for j in range(N_EVENTS):
        memory.record_reply(step_response(j, step_action(j)))
        memory.observe(pool[j % 3])

    def step() -> int:
        prompt = memory.prompt()
        return sum(
            isinstance(m.content, list) and any(b.get("type") == "image_url" for b in m.content)
            for m in prompt
        )

    assert benchmark(step) == 5  # the current screen plus four past ones
