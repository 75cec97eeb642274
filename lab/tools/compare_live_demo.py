"""``allocation.compare`` end to end on a world of the family (RESULTS.md 9k, 9l).

A selector deployed with the bundled one compared on half of the episodes (``compare: {share: 0.5}``,
shadow decisions on by default), ``--tasks`` tasks (seed ``--task-seed``) under policy seeds 0-2 recorded
through the LangGraph world agent (SQLite checkpointer, local archive), then ``causalcache compare``'s
:func:`~causalcache_lab.learn.compare.compare_threads` on the threads with the observed outcomes.

    python lab/tools/compare_live_demo.py --world devmix-01 --model runs/x/learn-teacher_forced/model/model \\
        --out runs/compare-demo
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv: list[str] | None = None) -> int:
    from langgraph.checkpoint.sqlite import SqliteSaver

    from causalcache_lab.eval.world_agent import build_world_agent, memory_for, run_world_episode
    from causalcache_lab.learn.compare import compare_threads
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_lab.world.family import policy_for_world
    from causalcache_lab.world.family_tasks import generate_world_tasks
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.config import parse_config

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--world", required=True, help="a world of the family (held-out worlds are refused by it)")
    p.add_argument("--model", required=True, help="the deployed selector (directory or .onnx)")
    p.add_argument("--out", required=True, type=Path)
    p.add_argument("--tasks", type=int, default=100)
    p.add_argument("--task-seed", type=int, default=9001)
    p.add_argument("--no-shadow", action="store_true", help="record without shadow decisions")
    args = p.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    archive, db = LocalArchive(args.out / "archive"), args.out / "checkpoints.sqlite"
    compare = {"share": 0.5, "seed": 0, "shadow": not args.no_shadow}
    cfg = parse_config(
        {"budget": 4, "policy": {"kind": "simulated"},
         "allocation": {"selector": {"model_path": args.model, "timeout_ms": 2000}, "compare": compare}}
    )  # fmt: skip
    labels, start = {}, time.perf_counter()
    tasks = generate_world_tasks(args.tasks, args.task_seed, worlds=args.world, purpose="evaluate")
    for seed in (0, 1, 2):
        allocation = build_allocator(cfg.allocation)
        for selector in (allocation.base, allocation.explorer):
            selector.use_screen_text(WorldScreenText(archive))
        policy = policy_for_world(args.world, seed)
        memory = memory_for("causalcache", 4, policy, archive, args.model, allocation=allocation)
        conn = sqlite3.connect(str(db), check_same_thread=False)
        try:
            graph = build_world_agent(memory, SqliteSaver(conn))
            for task in tasks:
                thread = f"s{seed}-{task.task_id}"
                outcome = run_world_episode(
                    task, memory, graph, arm="causalcache", policy=policy, archive=archive,
                    thread_id=thread, max_steps=len(task.steps) + 6,
                )  # fmt: skip
                labels[thread] = bool(outcome.success)
        finally:
            memory.close()
            conn.close()
    (args.out / "success.json").write_text(json.dumps(labels), encoding="utf-8")
    result = compare_threads(str(db), str(args.out / "archive"), labels)
    report = {"world": args.world, "model": args.model, "episodes": len(labels),
              "seconds": round(time.perf_counter() - start, 1), **result.to_dict()}  # fmt: skip
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
