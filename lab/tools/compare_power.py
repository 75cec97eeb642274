"""How many episodes does ``causalcache compare`` need? Simulated A/B splits of paired closed loops.

``allocation.compare`` sends each live episode to one of two selectors. A paired closed loop (the same
tasks and policy seeds run under both, e.g. ``lab/tools/learn_heldout.py``'s learned and bundled arms) holds
both outcomes of every episode, so it can replay what a live comparison would have seen: draw a 50/50
split of the episodes (each to one arm, seeded), take that arm's outcome, and judge the draw with
:func:`~causalcache_lab.learn.compare.compare_arms` twice, once on all episodes and once with the
trigger flags that shadow decisions record (an episode is triggered when the two arms' swaps or restored
counts differ at some step; until then the two runs are the same process). Reported per pair: the paired
difference, the triggered share ``ρ``, the mean interval half-width of the overall difference (all
episodes: its own; triggered: ``ρ`` times the triggered one), their squared ratio (how many times fewer
episodes the triggered analysis needs for the same width) and the share of draws judged worse / better
(RESULTS.md 9l).

    python lab/tools/compare_power.py --pair runs/x/eval-teacher_forced/results.json:causalcache \\
        runs/x/eval-bundled/results.json:causalcache --splits 100 --json power.json
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def episodes(spec: str) -> dict[tuple[str, int], dict[str, Any]]:
    """``results.json[:arm]`` -> ``(task id, seed) -> episode`` of that arm (default ``causalcache``)."""
    path, _, arm = spec.partition(":")
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    rows = {(e["task_id"], int(e["seed"])): e for e in data["episodes"] if e["arm"] == (arm or "causalcache")}
    if not rows:
        raise SystemExit(f"{path}: no episodes of arm {arm or 'causalcache'!r}")
    return rows


def _decisions(e: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(sorted((s["t"], tuple(s["restored"])) for s in e.get("swaps", []))), tuple(e.get("k", []))


def power(
    deployed: str, compared: str, *, splits: int, resamples: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Simulated live comparisons of one paired closed loop (module doc)."""
    import numpy as np

    from causalcache_lab.learn.compare import DEPLOYED_SELECTOR, compare_arms
    from causalcache_memory.allocation.registry import COMPARED_SELECTOR

    mine, other = episodes(deployed), episodes(compared)
    keys = sorted(set(mine) & set(other))
    if len(keys) < len(mine) or len(keys) < len(other):
        raise SystemExit(
            f"the two runs hold different episodes ({len(mine)}, {len(other)}; {len(keys)} shared)"
        )
    triggered = {k: _decisions(mine[k]) != _decisions(other[k]) for k in keys}
    rng = random.Random(seed)
    verdicts: dict[str, list[str]] = {"all": [], "triggered": []}
    widths: dict[str, list[float]] = {"all": [], "triggered": []}
    for draw in range(splits):
        outcomes = [
            (DEPLOYED_SELECTOR, bool(mine[k]["success"]), triggered[k])
            if rng.random() < 0.5
            else (COMPARED_SELECTOR, bool(other[k]["success"]), triggered[k])
            for k in keys
        ]
        whole = compare_arms([o[:2] for o in outcomes], resamples=resamples, seed=draw)
        trig = compare_arms(outcomes, resamples=resamples, seed=draw)
        verdicts["all"].append(whole.verdict)
        verdicts["triggered"].append(trig.verdict)
        widths["all"].append((whole.ci[1] - whole.ci[0]) / 2)
        t = trig.triggered
        if t is not None and t.deployed.episodes and t.compared.episodes:
            widths["triggered"].append(t.share * (t.ci[1] - t.ci[0]) / 2)
    paired = float(np.mean([int(mine[k]["success"]) - int(other[k]["success"]) for k in keys]))
    out: dict[str, Any] = {
        "deployed": deployed,
        "compared": compared,
        "episodes": len(keys),
        "paired_delta": round(paired, 4),
        "trigger_share": round(sum(triggered.values()) / len(keys), 3),
    }
    for kind in ("all", "triggered"):
        half = float(np.mean(widths[kind])) if widths[kind] else float("nan")
        out[kind] = {
            "half_width": round(half, 4),
            "worse": verdicts[kind].count("worse") / splits,
            "better": verdicts[kind].count("better") / splits,
        }
    ratio = (out["all"]["half_width"] / out["triggered"]["half_width"]) ** 2 if widths["triggered"] else None
    out["episodes_ratio"] = round(ratio, 2) if ratio is not None else None
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--pair", nargs=2, action="append", required=True, metavar=("DEPLOYED", "COMPARED"),
        help="results.json[:arm] of the deployed selector's run and of the compared one's (same tasks, seeds)",
    )  # fmt: skip
    p.add_argument("--splits", type=int, default=100, help="simulated 50/50 splits per pair (default 100)")
    p.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples per judgement")
    p.add_argument("--json", help="write the rows here")
    args = p.parse_args(argv)
    if args.splits < 1 or args.resamples < 100:
        p.error(f"--splits={args.splits} must be >= 1 and --resamples={args.resamples} >= 100")
    rows = []
    for deployed, compared in args.pair:
        row = power(deployed, compared, splits=args.splits, resamples=args.resamples)
        rows.append(row)
        print(json.dumps(row), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
