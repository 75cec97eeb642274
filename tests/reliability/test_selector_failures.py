"""Finding 7 (controller side) and 8: the selector time limit bounds the whole step; workers are owned.

Each scenario runs on a helper thread joined with a generous limit, so a regression fails the test
instead of hanging the suite.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path

import pytest
from reliability_agents import HangingAllocator, RaisingAllocator, SlowLoadAllocator, TypingPolicy
from reliability_helpers import screenshot

from causalcache_memory import Trace
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.errors import CausalCacheWarning

HERE = Path(__file__).parent


def _episode(ctl: MemoryController, steps: int, first: int = 0) -> list:
    trace = Trace("goal", episode_id="ep")
    decisions = []
    ctl.observe(trace, screenshot(first))
    for i in range(steps):
        decision = ctl.decide(trace)
        decisions.append(decision)
        ctl.record(trace, decision, screenshot(first + i + 1))
    return decisions


def _finishes(fn, limit_s: float = 20.0):
    out: dict = {}

    def run():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CausalCacheWarning)
            out["value"] = fn()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(limit_s)
    assert not thread.is_alive(), f"still running after {limit_s} s: the step is not bounded"
    return out["value"]


def test_raising_allocator_falls_back_with_the_reason(tmp_path):
    ctl = MemoryController(
        policy=TypingPolicy(), archive=LocalArchive(tmp_path), allocator=RaisingAllocator(), budget=1
    )
    with ctl, pytest.warns(CausalCacheWarning, match="scorer exploded"):
        decisions = _episode(ctl, 3)
    assert all("RuntimeError: scorer exploded" in (d.fallback or "") for d in decisions[1:])


def test_hung_allocator_bounds_every_step_and_never_blocks_observe(tmp_path):
    allocator = HangingAllocator()
    ctl = MemoryController(
        policy=TypingPolicy(),
        archive=LocalArchive(tmp_path),
        allocator=allocator,
        budget=1,
        selector_timeout_s=0.05,
    )
    try:
        decisions = _finishes(lambda: _episode(ctl, 6))
        reasons = [d.fallback or "" for d in decisions]
        assert "exceeded 50 ms" in reasons[0]
        assert all("still running step 1" in r for r in reasons[1:])  # later steps do not wait again
        assert all(d.allocation.allocator == "recent" for d in decisions)
        assert (
            len(allocator.prepared) == 1
        )  # only the first observe: later prepares were skipped, not waited on
    finally:
        allocator.release.set()
        ctl.close()


def test_slow_model_load_falls_back_then_recovers(tmp_path):
    allocator = SlowLoadAllocator(load_s=0.5)
    ctl = MemoryController(
        policy=TypingPolicy(),
        archive=LocalArchive(tmp_path),
        allocator=allocator,
        budget=1,
        selector_timeout_s=0.1,
    )
    with ctl:
        first = _finishes(lambda: _episode(ctl, 2))
        assert first[1].fallback is not None
        allocator_done = threading.Event()
        threading.Thread(
            target=lambda: (allocator.lock.acquire(), allocator.lock.release(), allocator_done.set())
        ).start()
        assert allocator_done.wait(10)
        later = _finishes(lambda: _episode(ctl, 3, first=10))
        assert later[-1].fallback is None and later[-1].allocation.allocator == "slow-load"


def test_close_stops_the_worker_and_context_exit_closes(tmp_path):
    before = set(threading.enumerate())  # by object: thread ids are reused
    with MemoryController(
        policy=TypingPolicy(), archive=LocalArchive(tmp_path), allocator=SlowLoadAllocator(0.0), budget=1
    ) as ctl:
        _episode(ctl, 3)
        assert any(t.name == "causalcache-alloc" for t in threading.enumerate())
    assert [t for t in threading.enumerate() if t not in before and t.name == "causalcache-alloc"] == []
    ctl.close()  # idempotent


def test_hung_scorers_never_keep_the_interpreter_alive(tmp_path):
    """11 controllers with a hung scorer, closed: the process exits (it used to hang forever)."""
    code = textwrap.dedent(
        f"""
        import sys, threading, warnings
        sys.path.insert(0, {str(HERE)!r})
        from reliability_agents import HangingAllocator, TypingPolicy
        from reliability_helpers import screenshot
        from causalcache_memory import Trace
        from causalcache_memory.archive import LocalArchive
        from causalcache_memory.controller import MemoryController
        warnings.simplefilter("ignore")
        for i in range(11):
            ctl = MemoryController(policy=TypingPolicy(), archive=LocalArchive({str(tmp_path)!r}),
                                   allocator=HangingAllocator(), budget=1, selector_timeout_s=0.02)
            trace = Trace("g", episode_id=f"ep{{i}}")
            ctl.observe(trace, screenshot(0))
            ctl.record(trace, ctl.decide(trace), screenshot(1))
            ctl.decide(trace)
            ctl.close()
        print("hung workers:", sum(t.name == "causalcache-alloc" for t in threading.enumerate()))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "hung workers: 11" in proc.stdout  # abandoned on daemon threads, and still the process exited


# ---------------------------------------------------------------- issue 27, finding 8: allocators holding the GIL
def _hold_the_gil() -> str:
    """Native code that never releases the GIL: a catastrophic regular expression (~0.5 s)."""
    import re

    re.fullmatch(r"(a|aa)*c", "a" * 31)
    return "late result"


def test_a_call_holding_the_gil_is_a_named_timeout_and_logged(caplog):
    """The caller cannot wake up while the call holds the GIL; the overrun used to pass unnamed (or the
    late result was even used, when it was set before the caller woke up)."""
    import logging

    from causalcache_memory._worker import BoundedWorker, WorkerTimeout

    worker = BoundedWorker("gil-test")
    try:
        with caplog.at_level(logging.WARNING, logger="causalcache_memory._worker"):
            with pytest.raises(WorkerTimeout, match=r"got control back only after \d+ ms .* held the GIL"):
                worker.call(_hold_the_gil, timeout_s=0.01, label="step 3")
        assert any("step 3" in r.getMessage() and "GIL" in r.getMessage() for r in caplog.records)
    finally:
        worker.close(join_s=5)
