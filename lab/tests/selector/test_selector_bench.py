"""Selector decision latency (features + onnxruntime + beam), B = 4, one thread.

Measured with ``pytest tests/selector/test_bench_selector.py --benchmark-enable``; the normal suite runs
each case once. Target (issue): p99 < 2 ms at 200 events and < 10 ms at 1000.
"""

from __future__ import annotations

import pytest
from selector_synth import FakeThumbs, make_trajectories

from causalcache_memory.allocation import AllocationContext
from causalcache_memory.selector.allocator import SelectorAllocator


@pytest.mark.parametrize("n_events", [50, 200, 1000])
def test_decision_latency(benchmark, trained, n_events):
    _, out, _ = trained
    selector = SelectorAllocator(out, threads=1)
    selector._extractor.thumbnails = FakeThumbs()  # image statistics on, as with an archive
    traj = make_trajectories(1, length=n_events + 1, seed=n_events)[0][0]
    ctx = AllocationContext(traj.trace_at(n_events + 1), 4, witness=traj.steps[n_events].action)
    selector.allocate(ctx)  # per-event static features are cached after the first decision on a trace
    alloc = benchmark(selector.allocate, ctx)
    assert len(alloc.selected) == 4
