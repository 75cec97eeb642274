"""Scenario: M concurrent agent episodes on one box, sharing one archive and one selector model.

Each episode is the CausalCache step of the deployment (:class:`~causalcache_memory.controller.
MemoryController`: pass 1, the learned selector with the pass-1 action as witness, pass 2 when it swaps,
then ``record`` = archive write + retain + thumbnail prefetch) with an instant policy, so the figures are
the memory's own cost. ``M`` episodes run at once:

* ``threads``: one process; every episode shares **one** archive object and **one**
  :class:`~causalcache_memory.selector.allocator.SelectorAllocator` (one onnxruntime session, whose
  ``run`` is thread-safe, and one thumbnail cache, which decodes each screenshot once even when several
  threads ask for it); each episode has its own controller and policy;
* ``processes``: ``M`` processes (spawned) on the same archive directory; each loads the selector model
  once (an onnxruntime session cannot be shared across processes).

Per ``M`` and mode: ``step_ms`` (mean wall time of a step as its agent sees it), ``cpu_ms_per_step``
(CPU time of the episodes, measured in the process that runs them, divided by their steps),
``steps_per_s`` (all episodes together), ``steps_per_cpu_s`` (steps per second of one busy core) and the
selector fallbacks (time limit hit under load). Screenshots are 1920x1080 PNGs; every step stores new
bytes.

``python -m causalcache_lab.bench.concurrency --json FILE`` runs it (``--quick`` for a smoke run).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import multiprocessing
import os
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causalcache_lab.bench.stats import machine_info, owns_workdir
from causalcache_memory._jsonl import dumps_json

__all__ = ["run_concurrency"]

MODES = ("threads", "processes")


def _pool(count: int, size: tuple[int, int]) -> tuple[bytes, ...]:
    from causalcache_lab.bench.screens import screenshot_pool

    return screenshot_pool(count, size)


def _episode(
    controller_args: dict[str, Any], pool: Sequence[bytes], episode: int, steps: int, counter_base: int
) -> dict[str, float]:
    """Run one episode; returns its step wall times and fallback count."""
    from causalcache_lab.bench.episode import GOAL, InstantPolicy
    from causalcache_lab.bench.screens import unique_variant
    from causalcache_memory.controller import MemoryController
    from causalcache_memory.errors import CausalCacheWarning
    from causalcache_memory.trace import Trace

    policy = InstantPolicy()
    controller = MemoryController(policy=policy, **controller_args)
    trace = Trace(GOAL, episode_id=f"concurrency-{episode}")
    controller.observe(trace, unique_variant(pool[episode % len(pool)], counter_base))
    wall = 0.0
    fallbacks = 0
    try:
        for step in range(1, steps + 1):
            policy.step = step
            shot = unique_variant(pool[(episode + step) % len(pool)], counter_base + step)
            start = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CausalCacheWarning)
                decision = controller.decide(trace)
            controller.record(trace, decision, shot, screen_size=(1920, 1080))
            wall += time.perf_counter() - start
            fallbacks += sum(
                "falling back to Recent-B" in str(w.message) for w in caught
            )  # not the idle warning
    finally:
        controller.close()
    return {"wall_s": wall, "steps": float(steps), "fallbacks": float(fallbacks)}


def _controller_args(archive: Any, selector: Any, budget: int) -> dict[str, Any]:
    return {"archive": archive, "allocator": selector, "budget": budget, "selector_timeout_s": 0.25}


def _process_episode(args: tuple[str, str | None, int, int, int, int, tuple[bytes, ...]]) -> dict[str, float]:
    root, model, budget, episode, steps, base, pool = args
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.selector.allocator import SelectorAllocator

    selector = SelectorAllocator(model, threads=1)  # loading the model is not part of a step
    archive = LocalArchive(root)
    cpu0, t0 = time.process_time(), time.time()
    out = _episode(_controller_args(archive, selector, budget), pool, episode, steps, base)
    out.update(cpu_s=time.process_time() - cpu0, t0=t0, t1=time.time())
    return out


def _summary(rows: list[dict[str, float]], wall: float, cpu: float) -> dict[str, float]:
    steps = sum(r["steps"] for r in rows)
    return {
        "step_ms": round(1000.0 * sum(r["wall_s"] for r in rows) / steps, 2),
        "cpu_ms_per_step": round(1000.0 * cpu / steps, 2),
        "steps_per_s": round(steps / wall, 2),
        "steps_per_cpu_s": round(steps / cpu, 2) if cpu > 0 else 0.0,
        "fallbacks": int(sum(r["fallbacks"] for r in rows)),
        "steps": int(steps),
        "wall_s": round(wall, 2),
    }


def _run_threads(
    root: Path, m: int, steps: int, budget: int, model: str | None, pool: Sequence[bytes]
) -> dict:
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.selector.allocator import SelectorAllocator

    archive = LocalArchive(root)  # one archive object and one selector for every episode
    selector = SelectorAllocator(model, threads=1)
    args = _controller_args(archive, selector, budget)
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(m) as ex:
        rows = list(ex.map(lambda e: _episode(args, pool, e, steps, 10_000 * (e + 1)), range(m)))
    return _summary(rows, time.perf_counter() - wall0, time.process_time() - cpu0)


def _run_processes(
    root: Path, m: int, steps: int, budget: int, model: str | None, pool: tuple[bytes, ...]
) -> dict:
    jobs = [(str(root), model, budget, e, steps, 10_000 * (e + 1) + 5_000_000, pool) for e in range(m)]
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(m, mp_context=ctx) as ex:
        list(ex.map(_noop, range(m)))  # start every worker first: spawning is not part of a step
        rows = list(ex.map(_process_episode, jobs))
    wall = max(r["t1"] for r in rows) - min(r["t0"] for r in rows)  # from the first step to the last
    cpu = sum(r["cpu_s"] for r in rows)
    return _summary(rows, wall, cpu)


def _noop(_: int) -> int:
    return os.getpid()


@owns_workdir
def run_concurrency(
    *,
    ms: Sequence[int] = (1, 4, 16),
    modes: Sequence[str] = MODES,
    steps: int = 10,
    budget: int = 4,
    selector_model: str | Path | None = None,
    workdir: str | Path | None = None,
    screen: tuple[int, int] = (1920, 1080),
) -> dict[str, Any]:
    """``{"concurrency": {mode: {"M<m>": {...}}}, "concurrency_info": {...}}`` (see the module docstring)."""
    bad = [m for m in modes if m not in MODES]
    if bad or any(m < 1 for m in ms):
        raise ValueError(f"modes must be in {MODES} and every M >= 1; got modes={modes}, ms={ms}")
    root = Path(workdir)  # type: ignore[arg-type]  # set by owns_workdir
    pool = _pool(8, screen)
    model = None if selector_model is None else str(selector_model)
    out: dict[str, Any] = {}
    for mode in modes:
        run = _run_threads if mode == "threads" else _run_processes
        out[mode] = {f"M{m}": run(root / f"{mode}-M{m}", m, steps, budget, model, pool) for m in ms}
    info = {"steps_per_episode": steps, "budget": budget, "cores": os.cpu_count(), "machine": machine_info()}
    return {"concurrency": out, "concurrency_info": info}


def format_table(results: dict[str, Any]) -> str:
    lines = [
        f"{'mode':<10} {'M':>3} {'step ms':>9} {'CPU ms/step':>12} {'steps/s':>8} {'steps/CPU-s':>12} {'fallbacks':>9}"
    ]
    for mode, per_m in results["concurrency"].items():
        for key, r in per_m.items():
            lines.append(
                f"{mode:<10} {key[1:]:>3} {r['step_ms']:>9.1f} {r['cpu_ms_per_step']:>12.1f} "
                f"{r['steps_per_s']:>8.2f} {r['steps_per_cpu_s']:>12.2f} {r['fallbacks']:>9}"
            )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ms", default="1,4,16", help="concurrent episodes, comma-separated (default 1,4,16)"
    )
    parser.add_argument("--modes", default="threads,processes")
    parser.add_argument("--steps", type=int, default=10, help="steps per episode (default 10)")
    parser.add_argument("--quick", action="store_true", help="M = 1,2 and 3 steps: a smoke run")
    parser.add_argument("--json", metavar="FILE")
    args = parser.parse_args(argv)
    ms = (1, 2) if args.quick else tuple(int(m) for m in args.ms.split(","))
    steps = 3 if args.quick else args.steps
    results = run_concurrency(ms=ms, modes=tuple(args.modes.split(",")), steps=steps)
    results["concurrency_info"]["command"] = "python -m causalcache_lab.bench.concurrency " + " ".join(
        sys.argv[1:] if argv is None else argv
    )
    print(format_table(results))
    if args.json:
        Path(args.json).write_text(dumps_json(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
