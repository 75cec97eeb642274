"""Cost of ``causalcache learn --guard-only`` on a black-box desktop recording (docs/LEARN.md, section 1b).

Records ``--episodes`` episodes of the scripted black-box desktop agent of ``tests/learn/scripted.py``
(1280x800 screens, pixel clicks, typing, hotkeys, scrolls; a 9-31-line accessibility dump with ``@(x,y)``
per screen stored as screen text) through the live controller with Recent-B, then runs the guard refit
and prints its wall and CPU seconds, the states, and the share flagged by the bundled and the refitted
guard::

    .venv/bin/python tools/learn_guard_refit_cost.py --episodes 300 --out /tmp/guard-cost
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "learn"))


def main() -> None:
    from scripted import desktop_episodes, desktop_text, record_scripted

    from causalcache_lab.learn import load_learn_config
    from causalcache_lab.learn.guard_refit import run_guard_refit

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--budget", type=int, default=4)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default="/tmp/guard-cost")
    args = ap.parse_args()
    root = Path(args.out)
    shutil.rmtree(root, ignore_errors=True)
    start = time.perf_counter()
    rec = record_scripted(
        root / "rec",
        desktop_episodes(args.episodes, seed=args.seed),
        budget=args.budget,
        screen_text=desktop_text,
    )
    recorded = time.perf_counter() - start
    threads = {"checkpointer": str(rec.checkpointer), "archive": rec.archive}
    config = load_learn_config(
        None, output=str(root / "out"), data={"threads": threads}, deploy={"budget": args.budget}
    )
    wall, cpu = time.perf_counter(), time.process_time()
    summary = run_guard_refit(config)
    guard = summary["guard"]
    print(
        json.dumps(
            {
                "episodes": args.episodes,
                "record_seconds": round(recorded, 1),
                "refit_wall_seconds": round(time.perf_counter() - wall, 1),
                "refit_cpu_seconds": round(time.process_time() - cpu, 1),
                "states": guard["states"],
                "bundled_guard_flagged": guard["base_flagged"],
                "refitted_guard_flagged_held_out": guard["flagged"],
            }
        )
    )


if __name__ == "__main__":
    main()
