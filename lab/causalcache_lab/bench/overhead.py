"""Scenario: memory overhead per agent step, excluding model calls.

One step at decision ``t`` (trace of ``t - 1`` events) is, for the CausalCache memory:

* ``decide``: :meth:`MemoryController.decide` with an :class:`~.episode.InstantPolicy`, minus the model
  calls' own time: allocation (for the learned selector: features, including the thumbnail of the newest
  screenshot, onnxruntime, beam; two passes render two prompts), prompt rendering and binding;
* ``archive``: ``archive.put`` of the new 1920x1080 PNG plus ``retain`` (the write the target excludes);
* ``record``: ``trace.record`` of the executed action;
* ``thumbnail`` (``causalcache``, the learned selector with the decode on the critical path): decoding
  the new screenshot into the selector's thumbnail cache, timed on its own right after the write (so
  ``allocate`` is features + onnxruntime + beam);
* ``prepare`` (``causalcache_prefetch``, the same selector as deployed through the controller): the
  allocator's ``prepare`` hook right after the write, which only submits the decode to the prefetch thread.
  Each timed step's pass-1 model call is then simulated by a ``model_delay_ms`` sleep (subtracted like
  any model time), which the decode overlaps; whatever is left of it when features need the thumbnail
  shows up in ``allocate``.

``step_cpu_ms`` is the process CPU time of each timed step (all threads, so the prefetched decode is
counted even though it is off the critical path; ``request_build_ms`` is excluded, as from the totals).

Not part of the step total, ``request_build_ms`` times turning the final prompt into OpenAI-style
messages (reading, re-hashing and base64-encoding its ``B + 1`` images), which an HTTP policy client does
inside its model call; the naive agent paid its base64 encoding once, when it stored the screenshot.

For the naive baseline (:class:`~.naive.NaiveMessageMemory`) a step is building the trimmed prompt,
appending the reply and base64-encoding the new screenshot into a message; it has no archive write.

Steps are timed in windows ``t - w .. t + w`` around each requested ``t``; steps outside the windows
only advance the episode and reuse a small pool of screenshots (deduplicated by the archive, cached
thumbnails), while every step from ``t - w - 1`` on archives new bytes (:func:`~.screens.unique_variant`),
so each timed step pays for one new blob and one new thumbnail exactly as in a real episode.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causalcache_lab.bench.episode import GOAL, InstantPolicy, step_action, step_response
from causalcache_lab.bench.screens import screenshot_pool, unique_variant
from causalcache_lab.bench.stats import owns_workdir, percentiles
from causalcache_memory.errors import CausalCacheWarning
from causalcache_memory.runtime.chat_format import openai_messages

__all__ = ["VARIANTS", "run_step_overhead"]

#: memory variant (allocator setup) key in the results -> how the step is run
VARIANTS = ("recent4", "causalcache", "causalcache_prefetch", "naive")
#: simulated pass-1 model call of the prefetch variant (a real VLM call takes seconds)
MODEL_DELAY_MS = 50.0
SCREEN = (1920, 1080)


def _windows(ts: Sequence[int], window: int) -> tuple[set[int], set[int]]:
    timed = {s for t in ts for s in range(max(2, t - window), t + window + 1)}
    fresh = timed | {s - 1 for s in timed if s > 1}
    return timed, fresh


def _causalcache_episode(
    allocator: Any,
    archive: Any,
    *,
    episode: str,
    last: int,
    timed: set[int],
    fresh: set[int],
    budget: int,
    pool: Sequence[bytes],
    counter: itertools.count,
    screen: tuple[int, int] = SCREEN,
    prefetch: bool = False,
    model_delay_ms: float = MODEL_DELAY_MS,
) -> dict[str, Any]:
    from causalcache_memory.controller import MemoryController
    from causalcache_memory.trace import Trace

    trace = Trace(GOAL, episode_id=episode, platform="desktop")
    policy = InstantPolicy()
    controller = MemoryController(policy=policy, archive=archive, allocator=allocator, budget=budget)
    controller.observe(trace, pool[0])
    samples: dict[int, dict[str, float]] = {}
    requests: dict[int, float] = {}
    cpu: dict[int, float] = {}
    second = fallbacks = 0
    prepare = getattr(allocator, "prepare", None) if prefetch else None
    try:
        for t in range(1, last + 1):
            policy.step = t
            policy.delay_s = model_delay_ms / 1000.0 if prefetch and t in timed else 0.0
            png = unique_variant(pool[t % len(pool)], next(counter)) if t in fresh else pool[t % len(pool)]
            cpu_start = time.process_time()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CausalCacheWarning)
                start = time.perf_counter()
                decision = controller.decide(trace)
                decide_ms = (time.perf_counter() - start) * 1000.0
            fallbacks += sum(
                "falling back to Recent-B" in str(w.message) for w in caught
            )  # not the idle warning
            model_ms = sum(decision.pass_latency_s) * 1000.0
            request_cpu = time.process_time()
            request_ms = _request_ms(policy.last_prompt) if t in timed else 0.0
            request_cpu = time.process_time() - request_cpu  # not part of the step: excluded from its CPU
            archive_ms, thumb_ms, record_ms = _record_step(
                trace, archive, allocator, png, decision, t, screen=screen, prepare=prepare
            )
            cpu_ms = (time.process_time() - cpu_start - request_cpu) * 1000.0
            if t in timed:
                cpu[t] = cpu_ms
                second += decision.second_pass
                allocate_ms = decision.selector_latency_s * 1000.0
                samples[t] = {
                    "archive": archive_ms,
                    ("prepare" if prefetch else "thumbnail"): thumb_ms,
                    "record": record_ms,
                    "allocate": allocate_ms,
                    "render_bind": decide_ms - model_ms - allocate_ms,
                }
                requests[t] = request_ms
    finally:
        controller.close()
        close = getattr(allocator, "close", None)
        if close is not None:
            close()
    return {
        "samples": samples,
        "second_pass": second,
        "fallbacks": fallbacks,
        "requests": requests,
        "cpu": cpu,
    }


def _record_step(
    trace: Any, archive: Any, allocator: Any, png: bytes, decision: Any, t: int, *, screen: Any, prepare: Any
) -> tuple[float, float, float]:
    """Archive the new screen, warm or prefetch its thumbnail, record the event: ``(ms, ms, ms)`` of each."""
    start = time.perf_counter()
    sha = archive.put(png).sha256
    archive.retain(trace.episode_id, [sha])
    archive_ms = (time.perf_counter() - start) * 1000.0
    start = time.perf_counter()
    if prepare is not None:
        prepare(archive, sha)  # what MemoryController.record does: start the decode, return
    else:
        thumbs = _thumbnail_cache(allocator)
        if thumbs is not None:
            thumbs.get(sha)
    thumb_ms = (time.perf_counter() - start) * 1000.0
    start = time.perf_counter()
    trace.record(decision.action or step_action(t), decision.response, sha, app="Shop", screen_size=screen)
    return archive_ms, thumb_ms, (time.perf_counter() - start) * 1000.0


def _request_ms(prompt: Any) -> float:
    """Time to build OpenAI-style messages (read, verify and base64 the B + 1 images) from ``prompt``."""
    if prompt is None:
        return 0.0
    start = time.perf_counter()
    openai_messages(prompt)
    return (time.perf_counter() - start) * 1000.0


def _naive_episode(
    *,
    last: int,
    timed: set[int],
    fresh: set[int],
    pool: Sequence[bytes],
    counter: itertools.count,
    past: int = 4,
) -> dict[str, Any]:
    from causalcache_lab.bench.naive import NaiveMessageMemory

    memory = NaiveMessageMemory(GOAL, past=past)
    memory.observe(pool[0])
    samples: dict[int, dict[str, float]] = {}
    cpu: dict[int, float] = {}
    for t in range(1, last + 1):
        png = unique_variant(pool[t % len(pool)], next(counter)) if t in fresh else pool[t % len(pool)]
        cpu_start = time.process_time()
        start = time.perf_counter()
        prompt = memory.prompt()
        prompt_ms = (time.perf_counter() - start) * 1000.0
        action = step_action(t)
        start = time.perf_counter()
        memory.record_reply(step_response(t, action))
        memory.observe(png)
        store_ms = (time.perf_counter() - start) * 1000.0
        if t in timed:
            samples[t] = {"render_bind": prompt_ms, "record": store_ms}
            cpu[t] = (time.process_time() - cpu_start) * 1000.0
        del prompt
    return {"samples": samples, "second_pass": 0, "fallbacks": 0, "cpu": cpu}


def _summarize(runs: list[dict[str, Any]], ts: Sequence[int], window: int) -> dict[str, Any]:
    total: dict[str, Any] = {}
    noarchive: dict[str, Any] = {}
    breakdown: dict[str, Any] = {}
    request: dict[str, Any] = {}
    nodecode: dict[str, Any] = {}
    cpu: dict[str, Any] = {}
    for t in ts:
        rows = [r["samples"][s] for r in runs for s in range(t - window, t + window + 1) if s in r["samples"]]
        key = f"t{t}"
        total[key] = percentiles([sum(row.values()) for row in rows])
        noarchive[key] = percentiles([sum(v for k, v in row.items() if k != "archive") for row in rows])
        nodecode[key] = percentiles(
            [sum(v for k, v in row.items() if k not in ("archive", "thumbnail")) for row in rows]
        )
        parts = sorted({k for row in rows for k in row})
        breakdown[key] = {
            k: round(sum(row.get(k, 0.0) for row in rows) / max(len(rows), 1), 3) for k in parts
        }
        window_steps = range(t - window, t + window + 1)
        requests = [
            r["requests"][s] for r in runs if "requests" in r for s in window_steps if s in r["requests"]
        ]
        if requests:
            request[key] = percentiles(requests)
        cpus = [r["cpu"][s] for r in runs if "cpu" in r for s in window_steps if s in r["cpu"]]
        if cpus:
            cpu[key] = percentiles(cpus)
    return {
        "cpu": cpu,
        "total": total,
        "noarchive": noarchive,
        "nodecode": nodecode,
        "breakdown": breakdown,
        "request": request,
    }


@owns_workdir
def run_step_overhead(
    *,
    variants: Sequence[str] = VARIANTS,
    ts: Sequence[int] = (10, 50, 200),
    episodes: int = 3,
    window: int = 3,
    budget: int = 4,
    pool_size: int = 6,
    workdir: str | Path | None = None,
    selector_model: str | Path | None = None,
    screen: tuple[int, int] = SCREEN,
    model_delay_ms: float = MODEL_DELAY_MS,
) -> dict[str, Any]:
    """Per-step memory overhead (ms) at each ``t`` for each memory variant.

    Returns ``{"step_overhead_ms": {variant: {"t<t>": {"p50", "p99", "mean", "n"}}},
    "step_overhead_noarchive_ms": {...}, "step_breakdown_ms": {variant: {"t<t>": {part: mean}}},
    "step_overhead_info": {...}, "step_cpu_ms": {variant: {"t<t>": stats}}}``; ``causalcache_prefetch`` runs
    the selector with its thumbnail prefetched during a ``model_delay_ms`` simulated model call.
    """
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"variants={unknown!r} are not benchmarked; choose from {list(VARIANTS)}")
    pool = screenshot_pool(pool_size, tuple(screen))
    timed, fresh = _windows(ts, window)
    scenario = _Scenario(
        root=Path(workdir),  # type: ignore[arg-type]  # set by owns_workdir
        pool=pool,
        timed=timed,
        fresh=fresh,
        last=max(ts) + window,
        budget=budget,
        screen=tuple(screen),
        selector_model=selector_model,
        model_delay_ms=model_delay_ms,
    )
    out: dict[str, Any] = {key: {} for key in _OUTPUT_KEYS}
    info: dict[str, Any] = {
        "episodes": episodes,
        "window": window,
        "budget": budget,
        "screen": list(screen),
        "png_bytes_mean": round(sum(map(len, pool)) / len(pool)),
        "model_delay_ms_prefetch": model_delay_ms,
    }
    for name in variants:
        runs = [scenario.episode(name, ep) for ep in range(episodes)]
        _record(out, name, _summarize(runs, ts, window))
        n_timed = sum(len(r["samples"]) for r in runs)
        info[name] = {
            "second_pass_rate": round(sum(r["second_pass"] for r in runs) / max(n_timed, 1), 3),
            "fallbacks": sum(r["fallbacks"] for r in runs),
        }
    out["step_overhead_info"] = info
    return out


_OUTPUT_KEYS = (
    "step_overhead_ms",
    "step_overhead_noarchive_ms",
    "step_breakdown_ms",
    "request_build_ms",
    "step_cpu_ms",
)


@dataclass
class _Scenario:
    """What every episode of one ``run_step_overhead`` call shares."""

    root: Path
    pool: list[bytes]
    timed: set[int]
    fresh: set[int]
    last: int
    budget: int
    screen: tuple[int, int]
    selector_model: str | Path | None
    model_delay_ms: float
    counter: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def episode(self, name: str, ep: int) -> dict[str, Any]:
        if name == "naive":
            return _naive_episode(
                last=self.last, timed=self.timed, fresh=self.fresh, pool=self.pool, counter=self.counter
            )
        from causalcache_memory.archive import LocalArchive

        return _causalcache_episode(
            _allocation(name, self.selector_model),
            LocalArchive(self.root / f"archive-{name}-{ep}"),
            episode=f"bench-{name}-{ep}",
            last=self.last,
            timed=self.timed,
            fresh=self.fresh,
            budget=self.budget,
            pool=self.pool,
            counter=self.counter,
            screen=self.screen,
            prefetch=name == "causalcache_prefetch",
            model_delay_ms=self.model_delay_ms,
        )


def _record(out: dict[str, Any], name: str, summary: dict[str, Any]) -> None:
    """Copy one variant's summary into the result tables."""
    out["step_overhead_ms"][name] = summary["total"]
    out["step_overhead_noarchive_ms"][name] = summary["noarchive"]
    out["step_breakdown_ms"][name] = summary["breakdown"]
    if name == "causalcache":
        out["step_overhead_noarchive_nothumbnail_ms"] = {name: summary["nodecode"]}
    if summary["cpu"]:
        out["step_cpu_ms"][name] = summary["cpu"]
    if summary["request"]:
        out["request_build_ms"][name] = summary["request"]


def _thumbnail_cache(allocator: Any) -> Any:
    """The learned selector's thumbnail cache (warmed right after the write: one new decode per step)."""
    from causalcache_memory.archive.thumbs import ThumbnailCache

    cache = getattr(getattr(allocator, "_extractor", None), "thumbnails", None)
    return cache if isinstance(cache, ThumbnailCache) else None


def _allocation(name: str, selector_model: str | Path | None) -> Any:
    if name == "recent4":
        from causalcache_memory.allocation import RecentAllocator

        return RecentAllocator()
    from causalcache_memory.selector.allocator import SelectorAllocator

    return SelectorAllocator(selector_model, threads=1)
