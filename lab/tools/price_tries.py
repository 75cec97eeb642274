"""The priced decision's tries on development worlds, one decision record per step (issue 50; notebook).

    nice -n 10 python lab/tools/price_tries.py 40 causalcache_priced 0,1,2 cache_friendly runs/try2.json \\
        --exchange-rate 30000 --slide-every 4

Runs ``generate_world_tasks(N, 0, worlds="dev")`` under each arm of ``lab/tools/price_eval.py`` (plus
``batch3``/``batch4``: Recent-4 with batch eviction in chunks of 3 and 4) in one layout, with the same
memory and meters as ``price_eval.py``, and writes every episode with its decision records (the
``price`` choice, ``promoted_gain``, the pass-1 proposal) and its Anthropic-model writes per call, for
reading why an episode flips. Development worlds only; docs/notebook/results/price_tries.md uses it.
"""

from __future__ import annotations

import argparse
import json
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

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("tasks", type=int)
    ap.add_argument("arms")
    ap.add_argument("seeds")
    ap.add_argument("layout", choices=pe.LAYOUTS)
    ap.add_argument("out")
    ap.add_argument("--exchange-rate", type=float, default=None)
    ap.add_argument("--slide-every", type=int, default=None)
    args = ap.parse_args(argv)
    for key in ("exchange_rate", "slide_every"):
        if getattr(args, key) is not None:
            pe.PRICED[key] = getattr(args, key)
    tasks = generate_world_tasks(args.tasks, 0, worlds="dev", purpose="evaluate")
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
                                    "writes": [c["anthropic"].cache_write_tokens for c in calls],
                                    "calls_t": [c["t"] for c in calls],
                                    "log": [{k: v for k, v in d.items() if k != "prompt_cost"} for d in o.log]})  # fmt: skip
                        print(arm, seed, task.task_id, o.success, f"{time.process_time():.0f}s", flush=True)
    Path(args.out).write_text(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    main()
