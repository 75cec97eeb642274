"""How often the deployed selector fires pass 2 on inputs unlike its training data, and how often it is guarded.

``python -m causalcache_memory.lab.selector.ood_probe --model DIR`` measures, at ``B`` = 4, the share of
decisions where the selector displaces a recent slot (``fire``: a second model call at deployment) and the
share its OOD guard sends to Recent-B (``ood``), on three inputs:

* ``world``: the synthetic world's eval templates on mobile, as they are (in distribution: the reference);
* ``reskinned``: the same trajectories with every screenshot replaced by a desktop-like benchmark screen
  (:mod:`causalcache_memory.lab.bench.screens`): same actions and summaries, a different-looking world;
* ``bench``: the overhead benchmark's random traces (:mod:`causalcache_memory.lab.bench.episode`: random
  clicks, typing, scrolls and app switches under a fixed goal), decided at several lengths with varied
  witnesses.

The witness is the gold next action for the world inputs (the most favourable case for firing) and a
random benchmark action for the random traces. No torch is imported.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "probe"]


def _rates(selector: Any, decisions: Sequence[Any]) -> dict[str, Any]:
    fired = ood = 0
    for ctx in decisions:
        allocation = selector.allocate(ctx)
        fired += not allocation.is_recent
        ood += allocation.info.get("fallback") == "ood"
    n = max(len(decisions), 1)
    return {"decisions": len(decisions), "fire_rate": fired / n, "ood_rate": ood / n}


def _world_decisions(trajectories: Sequence[Any], archive: Any, budget: int, remap: dict | None) -> list:
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.trace import Trace

    out = []
    for traj in trajectories:
        for t in range(budget + 2, len(traj) + 1):
            if remap is None:
                trace = traj.trace_at(t)
            else:
                steps = traj.steps
                trace = Trace(
                    traj.goal, episode_id=f"reskin-{traj.trajectory_id}-{t}", platform=traj.platform
                )
                trace.observe(remap[steps[0].screenshot_before])
                for step in steps[: t - 1]:
                    trace.record(step.action, step.response, remap[step.screenshot_after], app=step.app)
            out.append(AllocationContext(trace, budget, archive, witness=traj.steps[t - 1].action))
    return out


def _reskin(trajectories: Sequence[Any], archive: Any) -> dict[str, str]:
    """World screenshot hash -> a distinct benchmark screen stored in ``archive``."""
    from causalcache_memory.lab.bench.screens import screenshot_pool, unique_variant

    pool = screenshot_pool(8, (640, 360))
    counter = itertools.count(1)
    remap: dict[str, str] = {}
    for traj in trajectories:
        for step in traj.steps:
            for sha in (step.screenshot_before, step.screenshot_after):
                if sha is not None and sha not in remap:
                    n = next(counter)
                    remap[sha] = archive.put(unique_variant(pool[n % len(pool)], n)).sha256
    return remap


def _bench_decisions(archive: Any, budget: int, lengths: Sequence[int], witnesses: int) -> list:
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.lab.bench.episode import step_action
    from causalcache_memory.lab.bench.screens import screenshot_pool
    from causalcache_memory.lab.bench.selector_latency import SMALL, _trace

    pool = screenshot_pool(6, SMALL)
    counter = itertools.count(1)
    out = []
    for n in lengths:
        trace = _trace(n, archive, pool, counter)
        out += [
            AllocationContext(trace, budget, archive, witness=step_action(10_000 + i))
            for i in range(witnesses)
        ]
    return out


def probe(
    model: str | None = None,
    *,
    tasks: int = 40,
    seed: int = 4242,
    budget: int = 4,
    min_gain: float | str = "auto",
    ood_guard: bool = True,
    workdir: str | None = None,
) -> dict[str, Any]:
    """Fire and OOD rates on the three inputs of the module doc (``model`` None = the bundled scorer)."""
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.lab.world import generate_demonstrations, generate_tasks
    from causalcache_memory.selector.allocator import SelectorAllocator

    root = workdir or tempfile.mkdtemp(prefix="causalcache-ood-")
    archive = LocalArchive(f"{root}/archive")
    trajs = generate_demonstrations(generate_tasks(tasks, seed, platform="mobile", templates="eval"), archive)
    remap = _reskin(trajs, archive)

    def selector() -> Any:  # a fresh one per input: no feature cache shared across inputs
        return SelectorAllocator(model, min_gain=min_gain, ood_guard=ood_guard)

    sel = selector()
    return {
        "model": model or "bundled",
        "min_gain": sel.min_gain,
        "ood_guard": sel.ood_guard,
        "budget": budget,
        "world": _rates(sel, _world_decisions(trajs, archive, budget, None)),
        "reskinned": _rates(selector(), _world_decisions(trajs, archive, budget, remap)),
        "bench": _rates(selector(), _bench_decisions(archive, budget, (10, 20, 50, 100, 200), 16)),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="selector model (.onnx or directory); default: bundled")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--min-gain", default="auto", help="'auto' (calibrated) or a number")
    parser.add_argument("--no-ood-guard", action="store_true")
    parser.add_argument("--json", help="write the result here")
    args = parser.parse_args(argv)
    gain = args.min_gain if args.min_gain == "auto" else float(args.min_gain)
    result = probe(
        args.model, tasks=args.tasks, seed=args.seed, min_gain=gain, ood_guard=not args.no_ood_guard
    )
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
