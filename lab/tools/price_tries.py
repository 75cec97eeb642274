"""The priced decision's tries on development worlds, one decision record per step (issue 50; notebook).

    nice -n 10 python lab/tools/price_tries.py 40 causalcache_priced 0,1,2 cache_friendly runs/try2.json \\
        --exchange-rate 30000 --slide-every 4

Runs ``generate_world_tasks(N, --task-seed (default 0), worlds="dev")`` under each arm of ``lab/tools/price_eval.py`` (plus
``batch3``/``batch4``: Recent-4 with batch eviction in chunks of 3 and 4) in one layout, with the same
memory and meters as ``price_eval.py``, and writes every episode with its decision records (the
``price`` choice, ``promoted_gain``, the pass-1 proposal) and its Anthropic-model writes per call, for
reading why an episode flips. Development worlds only; docs/notebook/results/price_tries.md uses it.

The re-plan (docs/notebook/results/price_replan.md) adds the ``conversation`` layout, the mean-B arms
(``--chunk`` sets ``allocation.mean_b.chunk``), per-call images and prompt tokens, the automatic-prefix
model's writes, and ``--summary A.json [B.json ...]``, which prints one row per (arm, layout): MC and
control success (MC with a task-bootstrap 95% interval), writes per step under both cache models (all
writes over all decisions, as the tries count them), pass-2 share, images per call (mean and max) and
prompt tokens per call.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import price_eval as pe

pe.ARMS.update(
    {
        "batch3": {"allocator": "recent_batch", "batch_chunk": 3},
        "batch4": {"allocator": "recent_batch", "batch_chunk": 4},
    }
)


def main(argv: list[str] | None = None) -> None:
    from langgraph.checkpoint.memory import InMemorySaver

    from causalcache_lab.eval.prompt_price import MultiMeter
    from causalcache_lab.eval.world_agent import build_world_agent, run_world_episode
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_lab.world.family import policy_for_world
    from causalcache_lab.world.family_tasks import generate_world_tasks, world_of
    from causalcache_memory.archive.local import LocalArchive

    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--summary":
        rows = [r for path in argv[1:] for r in json.loads(Path(path).read_text())]
        print(summary_table(rows))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tasks", type=int)
    ap.add_argument("arms")
    ap.add_argument("seeds")
    ap.add_argument("layout", choices=pe.LAYOUTS)
    ap.add_argument("out")
    ap.add_argument("--exchange-rate", type=float, default=None)
    ap.add_argument("--slide-every", type=int, default=None)
    ap.add_argument("--chunk", type=int, default=None, help="allocation.mean_b.chunk")
    ap.add_argument("--task-seed", type=int, default=0, help="the dev-world task draw (the tries: 0)")
    ap.add_argument(
        "--hide-current-event",
        action="store_true",
        help="sensitivity check: drop meta['current_event'] from conversation prompts, so the world's "
        "simulated policy no longer counts the current screen as v_{t-1}",
    )
    args = ap.parse_args(argv)
    if args.hide_current_event:
        _hide_current_event()
    if args.chunk is not None:
        pe.MEAN_B["chunk"] = args.chunk
    start = time.perf_counter()
    for key in ("exchange_rate", "slide_every"):
        if getattr(args, key) is not None:
            pe.PRICED[key] = getattr(args, key)
    tasks = generate_world_tasks(args.tasks, args.task_seed, worlds="dev", purpose="evaluate")
    out: list[dict] = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in (int(s) for s in args.seeds.split(",")):
            for arm in args.arms.split(","):
                archive = LocalArchive(Path(tmp) / f"{arm}-{seed}")
                for world in dict.fromkeys(world_of(t) for t in tasks):
                    pol = policy_for_world(world, seed)
                    meter = MultiMeter()
                    memory = pe._memory(arm, args.layout, pol, archive, meter, WorldScreenText)
                    graph = build_world_agent(memory, InMemorySaver())
                    for task in (t for t in tasks if world_of(t) == world):
                        meter.take()
                        o = run_world_episode(task, memory, graph, arm=arm, policy=pol, archive=archive,
                                              thread_id=f"{arm}-{seed}-{task.task_id}",
                                              max_steps=len(task.steps) + 6, seed=seed)  # fmt: skip
                        calls = meter.take()
                        out.append({"layout": args.layout, "arm": arm, "seed": seed, "world": world,
                                    "task": task.task_id, "split": task.split, "success": o.success,
                                    "evidence": list(o.evidence_steps),
                                    "decisions": len(o.log),
                                    "pass2": sum(1 for d in o.log if d.get("second_pass")),
                                    "writes": [c["anthropic"].cache_write_tokens for c in calls],
                                    "writes_auto": [c["automatic"].cache_write_tokens for c in calls],
                                    "prompt_tokens": [c["anthropic"].prompt_tokens for c in calls],
                                    "images": [c["images"] for c in calls],
                                    "retained": [c["retained"] for c in calls],
                                    "calls_t": [c["t"] for c in calls],
                                    "log": [{k: v for k, v in d.items() if k != "prompt_cost"} for d in o.log]})  # fmt: skip
                        print(arm, seed, task.task_id, o.success, f"{time.process_time():.0f}s", flush=True)
    Path(args.out).write_text(json.dumps(out, default=str) + "\n")
    print(f"wall {time.perf_counter() - start:.0f} s, cpu {time.process_time():.0f} s, "
          f"load {os.getloadavg()}", flush=True)  # fmt: skip
    print(summary_table(out))


def _hide_current_event() -> None:
    """Render conversation prompts without ``meta["current_event"]`` (``--hide-current-event``)."""
    from dataclasses import replace

    import causalcache_memory.render.prompt as rp

    render = rp._render_conversation

    def hidden(*args, **kwargs):
        prompt = render(*args, **kwargs)
        return replace(prompt, meta={k: v for k, v in prompt.meta.items() if k != "current_event"})

    rp._render_conversation = hidden


def summary_table(rows: list[dict]) -> str:
    """One markdown row per (arm, layout) of price_tries rows (module docstring)."""
    import numpy as np

    lines = [
        "| arm | layout | MC [95% CI] | control | write/step A (vs 5343) | write/step auto | pass 2 "
        "| images/call mean (max) | retained/call | prompt tokens/call |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for arm, layout in dict.fromkeys((r["arm"], r["layout"]) for r in rows):
        mine = [r for r in rows if r["arm"] == arm and r["layout"] == layout]
        mc = [r for r in mine if r["split"] == "memory_critical"]
        ct = [r for r in mine if r["split"] == "control"]
        per_task: dict[tuple, list[float]] = {}
        for r in mc:
            per_task.setdefault((r["world"], r["task"]), []).append(float(r["success"]))
        means = np.array([np.mean(v) for v in per_task.values()])
        boots = np.random.default_rng(0).choice(means, size=(2000, len(means))).mean(axis=1)
        lo, hi = np.percentile(boots, 2.5), np.percentile(boots, 97.5)
        decisions = sum(r.get("decisions", len(r.get("log", []))) for r in mine)
        pass2 = sum(r.get("pass2", sum(1 for d in r.get("log", []) if d.get("second_pass"))) for r in mine)
        wa = sum(sum(r["writes"]) for r in mine) / decisions
        wo = sum(sum(r.get("writes_auto", [])) for r in mine) / decisions
        images = [i for r in mine for i in r.get("images", [])]
        retained = [i for r in mine for i in r.get("retained", [])]
        prompt = [i for r in mine for i in r.get("prompt_tokens", [])]
        lines.append(
            f"| {arm} | {layout} | {sum(r['success'] for r in mc)}/{len(mc)} = {means.mean():.2f} "
            f"[{lo:.2f}, {hi:.2f}] | {sum(r['success'] for r in ct)}/{len(ct)} = "
            f"{sum(r['success'] for r in ct) / max(1, len(ct)):.2f} | {wa:.0f} ({wa / 5343 - 1:+.0%}) | {wo:.0f} "
            f"| {pass2 / max(1, decisions):.1%} | {np.mean(images) if images else float('nan'):.2f} "
            f"({max(images, default=0)}) | {np.mean(retained) if retained else float('nan'):.2f} "
            f"| {np.mean(prompt) if prompt else float('nan'):.0f} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
