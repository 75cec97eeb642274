"""The guard-only refit against the full `learn` where the bundle is idle (docs/LEARN.md, section 1b).

On a world whose screens the bundled guard declines (e.g. ``devtype-00``, a development world: its typed
slash navigation is out of the bundle's distribution, RESULTS.md 9j), record ``--record`` pure Recent-4
episodes (task seed 7001), run ``causalcache learn --guard-only`` and, unless ``--skip-full``, the full
``learn`` with teacher-forced labels against the full-history action (every episode), then evaluate Recent-4, the bundle, the guard-only model and the full
model in the closed loop on ``--eval`` fresh tasks (seed 9001, policy seeds 0,1,2), with task-paired
contrasts (lab/tools/paired_contrast.py). Every step is resumable (lab/tools/learn_heldout.py's helpers)::

    .venv/bin/python tools/learn_guard_vs_full.py --out runs/guard_vs_full --world devtype-00
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def _guard(out: Path, record: Path) -> dict:
    from causalcache_lab.learn import load_learn_config
    from causalcache_lab.learn.guard_refit import run_guard_refit

    config = load_learn_config(
        output=str(out),
        data={
            "threads": {
                "checkpointer": str(record / "checkpoints-recent-b4-s0.sqlite"),
                "archive": str(record / "archive-recent-b4-s0"),
                "source": "synthetic-world",
            }
        },
        screen_text={"factory": "causalcache_lab.selector.world_text:world_screen_text"},
        deploy={"budget": 4},
    )
    wall, cpu = time.perf_counter(), time.process_time()
    summary = run_guard_refit(config, log=print)
    summary["cpu_seconds"] = round(time.process_time() - cpu, 1)
    summary["wall_seconds"] = round(time.perf_counter() - wall, 1)
    return summary


def main() -> int:
    from learn_heldout import _evaluate, _learn, _record
    from paired_contrast import contrast

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/guard_vs_full")
    p.add_argument("--world", default="devtype-00")
    p.add_argument("--record", type=int, default=200)
    p.add_argument("--eval", type=int, default=40)
    p.add_argument("--skip-full", action="store_true")
    args = p.parse_args()
    out = Path(args.out)
    rec = out / "record"
    if not (rec / "success.json").exists():
        _, secs = _record(rec, args.world, args.record, None)
        print(f"recorded {args.record} episodes in {secs:.0f} s", flush=True)
    report: dict = {"world": args.world, "record": args.record, "eval": args.eval}
    guard = _guard(out / "guard", rec)
    report["guard"] = {k: guard[k] for k in ("cpu_seconds", "wall_seconds")} | {
        k: guard["guard"][k] for k in ("states", "base_flagged", "flagged")
    }
    models = {"guard": guard["guard"]["model"]}
    if not args.skip_full:
        # a pure Recent-4 recording: labels against the labeller's full-history action, failed episodes
        # too (docs/LEARN.md section 2, RESULTS.md 9i), as the devtype runs of RESULTS.md 9j
        labels = {"reference": "full_history"}
        full = _learn(out / "learn-teacher_forced", rec, args.world, "teacher_forced", 4, {}, labels, True)
        models["full"] = full["model"]
        report["full_seconds"] = full["seconds"]
    evals = {
        "recent": _evaluate(out / "eval-recent", args.world, args.eval, None, ("recent",)),
        "bundled": _evaluate(out / "eval-bundled", args.world, args.eval, None, ("causalcache",)),
    }
    for name, model in models.items():
        evals[name] = _evaluate(out / f"eval-{name}", args.world, args.eval, model, ("causalcache",))
        print(f"evaluated {name}", flush=True)
    report["ood"] = evals
    recent, bundled = out / "eval-recent/results.json", out / "eval-bundled/results.json"
    report["contrasts"] = {"bundled_vs_recent": contrast(f"{bundled}:causalcache", f"{recent}:recent")}
    for name in models:
        mine = out / f"eval-{name}/results.json"
        report["contrasts"][f"{name}_vs_recent"] = contrast(f"{mine}:causalcache", f"{recent}:recent")
        report["contrasts"][f"{name}_vs_bundled"] = contrast(f"{mine}:causalcache", f"{bundled}:causalcache")
    (out / "report.json").write_text(json.dumps(report, indent=1, default=str))
    print(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
