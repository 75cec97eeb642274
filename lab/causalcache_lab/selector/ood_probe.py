"""How often the deployed selector fires pass 2 on inputs unlike its training data, and how often it is guarded.

``python -m causalcache_lab.selector.ood_probe --model DIR`` measures, at ``B`` = 4, the share of
decisions where the selector displaces a recent slot (``fire``: a second model call at deployment) and the
share its OOD guard sends to Recent-B (``ood``), on three inputs:

* ``world``: the synthetic world's eval templates on mobile, as they are (in distribution: the reference);
* ``reskinned``: the same trajectories with every screenshot replaced by a desktop-like benchmark screen
  (:mod:`causalcache_lab.bench.screens`): same actions and summaries, a different-looking world;
* ``bench``: the overhead benchmark's random traces (:mod:`causalcache_lab.bench.episode`: random
  clicks, typing, scrolls and app switches under a fixed goal), decided at several lengths with varied
  witnesses.

The witness is the gold next action for the world inputs (the most favourable case for firing) and a
random benchmark action for the random traces. No torch is imported.

``--worlds dev-03`` (any world ids or split names of the world family except held-out worlds) instead
measures, on expert demonstrations of those worlds, every decision at ``B`` = 4 with the gold witness,
per world and for each ``--budgets`` value of ``selector.second_pass_share``: the pass-2 fire rate and
the OOD rate, over the decisions where a swap is possible (``t - 1 > B``; RESULTS.md 8b); and the
rates at the default budget on the same decisions with every verb renamed to an unused verb of its
family (``click`` -> ``long_press``, ...) and with the screen size doubled.
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from collections.abc import Sequence
from typing import Any

__all__ = ["main", "probe", "probe_worlds"]


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
    from causalcache_lab.bench.screens import screenshot_pool, unique_variant

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
    from causalcache_lab.bench.episode import step_action
    from causalcache_lab.bench.screens import screenshot_pool
    from causalcache_lab.bench.selector_latency import SMALL, _trace
    from causalcache_memory.allocation import AllocationContext

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
    from causalcache_lab.world import generate_demonstrations, generate_tasks
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

    root = workdir or tempfile.mkdtemp(prefix="causalcache-ood-")
    archive = LocalArchive(f"{root}/archive")
    trajs = generate_demonstrations(generate_tasks(tasks, seed, platform="mobile", templates="eval"), archive)
    remap = _reskin(trajs, archive)

    def selector() -> Any:  # a fresh one per input: no feature cache shared across inputs
        # the model's guard on every decision (the guard before try 2): this probe measures that guard
        return SelectorAllocator(model, min_gain=min_gain, ood_guard=ood_guard, **GUARD_BEFORE_TRY2)

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


def probe_worlds(
    model: str | None,
    worlds: str,
    *,
    tasks: int = 40,
    seed: int = 4242,
    budget: int = 4,
    budgets: Sequence[float] = (0.05, 0.15, 0.3, 1.0),
    workdir: str | None = None,
) -> dict[str, Any]:
    """Fire and OOD rates per family world and ``second_pass_share`` (module doc); held-out worlds refused."""
    from causalcache_lab.world import generate_demonstrations
    from causalcache_lab.world.family_tasks import generate_world_tasks, world_of
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

    root = workdir or tempfile.mkdtemp(prefix="causalcache-ood-")
    archive = LocalArchive(f"{root}/archive")
    generated = generate_world_tasks(tasks, seed, worlds=worlds, purpose="calibrate")
    by_world: dict[str, list[Any]] = {}
    for task, traj in zip(generated, generate_demonstrations(generated, archive), strict=True):
        by_world.setdefault(world_of(task), []).append(traj)
    out: dict[str, Any] = {"model": model or "bundled", "budget": budget, "worlds": {}}
    for world, trajs in sorted(by_world.items()):
        decisions = _world_decisions(trajs, archive, budget, None)
        rows = {}
        for b in budgets:
            sel = SelectorAllocator(model, second_pass_share=b, **GUARD_BEFORE_TRY2)  # the model's guard
            rows[str(b)] = {"min_gain": sel.thresholds.for_budget(budget), **_rates(sel, decisions)}
        perturbed = {
            name: _rates(
                SelectorAllocator(model, **GUARD_BEFORE_TRY2),
                _world_decisions([change(t) for t in trajs], archive, budget, None),
            )
            for name, change in (("verbs_renamed", _renamed), ("screen_doubled", _doubled))
        }
        out["worlds"][world] = {"tasks": len(trajs), "rows": rows, "perturbed": perturbed}
    return out


#: a verb of the same family the world never uses (``selector.schema.TYPE_GROUPS``)
_RENAME = {"click": "long_press", "drag": "swipe", "key": "hotkey", "back": "home"}


def _renamed(traj: Any) -> Any:
    """``traj`` with every action of a renamed verb replaced by its same-family twin (:data:`_RENAME`)."""
    import dataclasses

    def swap(step: Any) -> Any:
        new = _RENAME.get(step.action.type)
        return (
            step
            if new is None
            else dataclasses.replace(step, action=dataclasses.replace(step.action, type=new))
        )

    return dataclasses.replace(traj, steps=tuple(swap(s) for s in traj.steps))


def _doubled(traj: Any) -> Any:
    """``traj`` on a screen twice as large (points are relative; summaries render pixels)."""
    import dataclasses

    return dataclasses.replace(traj, screen_size=tuple(2 * v for v in traj.screen_size))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="selector model (.onnx or directory); default: bundled")
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--seed", type=int, default=4242)
    parser.add_argument("--min-gain", default="auto", help="'auto' (calibrated) or a number")
    parser.add_argument("--no-ood-guard", action="store_true")
    parser.add_argument("--json", help="write the result here")
    parser.add_argument("--worlds", help="family worlds to probe instead (e.g. dev or dev-00,dev-03)")
    parser.add_argument("--budgets", default="0.05,0.15,0.3,1", help="second_pass_share values (--worlds)")
    args = parser.parse_args(argv)
    gain = args.min_gain if args.min_gain == "auto" else float(args.min_gain)
    if args.worlds:
        budgets = [float(b) for b in args.budgets.split(",")]
        result = probe_worlds(args.model, args.worlds, tasks=args.tasks, seed=args.seed, budgets=budgets)
    else:
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
