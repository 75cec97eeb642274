"""Scenario: learned-selector decision latency (features + onnxruntime + exact-B beam) on one thread.

A trace of ``N`` events is built once (small distinct screenshots, so building it is cheap; thumbnails
are then cached, as in a running episode where each screenshot is decoded once), and one decision at
``t = N + 1`` is timed repeatedly with varying witness actions: :meth:`SelectorAllocator.allocate`
end to end. Every screenshot has screen text in the archive (``put_text``), so the ``text_*`` features
are computed on every decision (each blob's text is read and encoded once, as in a running episode). The split into feature extraction and scoring + beam uses the same public pieces.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causalcache_lab.bench.episode import GOAL, step_action, step_response
from causalcache_lab.bench.screens import screenshot_pool, unique_variant
from causalcache_lab.bench.stats import percentiles

__all__ = ["run_selector_latency"]

SMALL = (192, 108)


def _screen_text(j: int) -> str:
    """A screen's text (~12 lines, a few value-shaped tokens), as an accessibility dump would give it."""
    items = ("Desk Lamp", "Plant Pot", "Notebook Set", "Sunglasses", "Travel Mug")
    lines = ["Shop", "09:41", items[j % len(items)], f"Order #{100000 + 7919 * j % 900000}"]
    lines += [f"Placed: Jan {1 + j % 28}", "Status: Delivered", f"Total: ${10 + j % 90}.{j % 100:02d}"]
    lines += ["Track package", "Track", "Orders", "Account", f"Ticket: TK-{1000 + j % 9000}"]
    return "\n".join(lines)


def _trace(n: int, archive: Any, pool: Sequence[bytes], counter: itertools.count) -> Any:
    from causalcache_memory.trace import Trace

    trace = Trace(GOAL, episode_id=f"selector-{n}", platform="desktop")
    first = archive.put(unique_variant(pool[0], next(counter))).sha256
    archive.put_text(first, _screen_text(0))
    trace.observe(first)
    for j in range(1, n + 1):
        sha = archive.put(unique_variant(pool[j % len(pool)], next(counter))).sha256
        archive.put_text(sha, _screen_text(j))  # the text features run on every decision
        action = step_action(j)
        trace.record(action, step_response(j, action), sha, app="Shop", screen_size=(1920, 1080))
    return trace


def run_selector_latency(
    *,
    sizes: Sequence[int] = (50, 200, 1000),
    repeats: int = 200,
    budget: int = 4,
    beam_width: int = 4,
    selector_model: str | Path | None = None,
) -> dict[str, Any]:
    """``{"selector_ms": {"n<N>": {"p50", "p99", "mean", "n"}}, "selector_breakdown_ms": {...}}``."""
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.archive import FsspecArchive
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.selector.beam import beam_search
    from causalcache_memory.selector.features import context_features

    # thumbnails are read once per blob and then cached, so the store does not matter: use memory
    archive = FsspecArchive(f"memory://causalcache-bench/selector-{uuid.uuid4().hex}")
    pool = screenshot_pool(6, SMALL)
    counter = itertools.count(1)
    selector = SelectorAllocator(selector_model, beam_width=beam_width, threads=1)
    witnesses = [step_action(10_000 + i) for i in range(16)]
    out: dict[str, Any] = {"selector_ms": {}, "selector_breakdown_ms": {}}
    for n in sizes:
        trace = _trace(n, archive, pool, counter)
        contexts = [AllocationContext(trace, budget, archive, witness=w) for w in witnesses]
        selector.allocate(contexts[0])  # builds the per-trace feature cache and the thumbnails once
        samples, feats, beams, calls, swaps = [], [], [], [], []
        for i in range(repeats):
            ctx = contexts[i % len(contexts)]
            start = time.perf_counter()
            allocation = selector.allocate(ctx)
            samples.append((time.perf_counter() - start) * 1000.0)
            swaps.append(allocation.k)
        extractor = selector._extractor  # the selector's warm extractor: times the same feature path
        for i in range(max(repeats // 4, 5)):
            ctx = contexts[i % len(contexts)]
            start = time.perf_counter()
            events = extractor(trace, budget, ctx.witness)
            mid = time.perf_counter()
            scorer = selector.model.scorer(events, context_features(trace.t, budget, ctx.witness))
            result = beam_search(scorer, t=trace.t, budget=budget, beam_width=beam_width)
            end = time.perf_counter()
            feats.append((mid - start) * 1000.0)
            beams.append((end - mid) * 1000.0)
            calls.append(result.calls)
        key = f"n{n}"
        out["selector_ms"][key] = percentiles(samples)
        out["selector_breakdown_ms"][key] = {
            "features_p50": percentiles(feats)["p50"],
            "onnx_beam_p50": percentiles(beams)["p50"],
            "onnx_calls_mean": round(sum(calls) / len(calls), 2),
            "k_mean": round(sum(swaps) / len(swaps), 2),
        }
    archive.fs.rm(archive.root, recursive=True)
    return out
