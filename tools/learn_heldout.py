"""`causalcache learn` on a held-out world: record Recent-4 threads, learn, deploy, evaluate (RESULTS.md 9).

This is the "train on your own agent" scenario: the recorded episodes of the held-out world are the
*user's* data, so labelling and training on them is what a team does with its own agent. Nothing of the
method is chosen on this world (knobs, thresholds rules and the learn defaults were fixed before).

    python tools/learn_heldout.py --out runs/learn_heldout --world heldout-02 --record 200 --eval 100

Steps: (1) record ``--record`` Recent-4 episodes through the LangGraph world agent (SQLite checkpointer,
local archive; policy seed 0; task seed 7001) and write the success labels the harness observed;
(2) ``causalcache learn`` on those threads with each ``--sources`` entry (teacher-forced scoring by the
simulated policy; agreement labels with the simulated policy as a black box under seeds 0..k-1);
(3) closed loop on ``--eval`` fresh tasks of the world (task seed 9001, policy seeds 0,1,2): Recent-4,
the bundled selector and each learned selector; task-paired contrasts (tools/paired_contrast.py) and the
share of selector decisions the OOD guard declined.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _record(out: Path, world: str, tasks: int) -> tuple[Path, float]:
    from causalcache_memory.lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop

    start = time.perf_counter()
    settings = ClosedLoopSettings(
        tasks=tasks, seed=7001, arms=("recent",), worlds=world, policy_seeds=(0,), budget_curve=(), budget=4
    )
    results = run_closed_loop(settings, out, progress=False)
    success = {f"recent-b4-s0-{e['task_id']}": bool(e["success"]) for e in results["episodes"]}
    (out / "success.json").write_text(json.dumps(success, indent=1))
    return out / "success.json", time.perf_counter() - start


def _learn(out: Path, record: Path, world: str, source: str, k: int) -> dict:
    from causalcache_memory.lab.learn import load_learn_config, run_learn

    raw = {
        "output": str(out),
        "data": {
            "threads": {
                "checkpointer": str(record / "checkpoints-recent-b4-s0.sqlite"),
                "archive": str(record / "archive-recent-b4-s0"),
                "success": str(record / "success.json"),
                "source": "synthetic-world",
            }
        },
        "labels": {"budgets": [4]},
        "sources": {source: 1.0},
        "deploy": {"budget": 4},
    }
    if source == "teacher_forced":
        raw["labeller"] = {"factory": "learn_heldout:world_policy", "kwargs": {"world": world}}
    else:
        raw["labeller"] = {"factory": "learn_heldout:world_policies", "kwargs": {"world": world, "k": k}}
        raw["agreement"] = {"k": k, "temperature": None}
    return run_learn(load_learn_config(**raw), progress=False, log=print)


def world_policy(world: str):  # type: ignore[no-untyped-def]
    from causalcache_memory.lab.world.family import policy_for_world

    return policy_for_world(world, 0)


def world_policies(world: str, k: int):  # type: ignore[no-untyped-def]
    from causalcache_memory.lab.world.family import policy_for_world

    return [policy_for_world(world, s) for s in range(k)]


def _evaluate(out: Path, world: str, tasks: int, selector: str | None, arms: tuple[str, ...]) -> dict:
    from causalcache_memory.lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop

    counts = {"decisions": 0, "ood": 0}

    def count(outcome) -> None:  # type: ignore[no-untyped-def]
        if outcome.arm != "causalcache":
            return
        for rec in outcome.log:
            if int(rec.get("t", 0)) > outcome.budget + 1:  # a swap is possible: the selector decides
                counts["decisions"] += 1
                counts["ood"] += rec.get("fallback") == "ood"

    settings = ClosedLoopSettings(
        tasks=tasks, seed=9001, arms=arms, worlds=world, policy_seeds=(0, 1, 2), budget_curve=(),
        budget=4, selector_path=selector,
    )  # fmt: skip
    start = time.perf_counter()
    results = run_closed_loop(settings, out, progress=False, on_episode=count)
    results.pop("showcase", None)
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    return {
        "ood_rate": counts["ood"] / max(counts["decisions"], 1),
        **counts,
        "seconds": time.perf_counter() - start,
    }


def main(argv: list[str] | None = None) -> int:
    from paired_contrast import contrast

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/learn_heldout")
    p.add_argument("--world", default="heldout-02")
    p.add_argument("--record", type=int, default=200)
    p.add_argument("--eval", type=int, default=100)
    p.add_argument("--sources", default="teacher_forced,agreement")
    p.add_argument("--k", type=int, default=4)
    p.add_argument(
        "--bundled",
        help="results.json of an earlier Recent-4 + bundled-selector run on the same --eval tasks",
    )
    args = p.parse_args(argv)
    out = Path(args.out)
    report: dict = {"world": args.world}
    rec = out / "record"
    if not (rec / "success.json").exists():
        _, secs = _record(rec, args.world, args.record)
        report["record_seconds"] = round(secs, 1)
    success = json.loads((rec / "success.json").read_text())
    report["recorded"] = {"episodes": len(success), "successes": sum(success.values())}
    bundled = Path(args.bundled) if args.bundled else out / "eval-bundled/results.json"
    evals = {}
    if not args.bundled:
        evals["bundled"] = _evaluate(
            out / "eval-bundled", args.world, args.eval, None, ("recent", "causalcache")
        )
    for source in args.sources.split(","):
        summary = _learn(out / f"learn-{source}", rec, args.world, source, args.k)
        report[f"learn-{source}"] = {
            "seconds": summary["seconds"],
            "plan": summary["plan"],
            "stages": {
                n: {k: v for k, v in s.items() if k != "report"} for n, s in summary["stages"].items()
            },
        }
        evals[source] = _evaluate(
            out / f"eval-{source}", args.world, args.eval, summary["model"], ("causalcache",)
        )
    report["eval"] = evals
    report["contrasts"] = {"bundled_vs_recent": contrast(f"{bundled}:causalcache", f"{bundled}:recent")}
    for source in args.sources.split(","):
        mine = out / f"eval-{source}/results.json"
        report["contrasts"][f"{source}_vs_recent"] = contrast(f"{mine}:causalcache", f"{bundled}:recent")
        report["contrasts"][f"{source}_vs_bundled"] = contrast(
            f"{mine}:causalcache", f"{bundled}:causalcache"
        )
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report["contrasts"], indent=1))
    print(json.dumps(report["eval"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
