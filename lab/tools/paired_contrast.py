"""Task-paired contrast between any two closed-loop arms, from one or two ``results.json`` files.

``causalcache eval closed-loop`` contrasts every arm with Recent-B. A skeptic also asks "is the learned
selector better than a random draw?", and the two arms may come from two runs (e.g. the selector at another
``--min-gain``). Both runs must use the same tasks and policy seeds; a task's score is its mean over the
seeds, and the interval is the same task bootstrap as the closed-loop report's.

    python lab/tools/paired_contrast.py runs/cl_main/results.json:causalcache runs/cl_main/results.json:random
    python lab/tools/paired_contrast.py runs/cl_rule0/results.json:causalcache runs/cl_main/results.json:random
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def task_scores(path: Path, arm: str) -> tuple[dict[str, float], dict[str, str], set[int]]:
    data = json.loads(path.read_text(encoding="utf-8"))
    budget = data["meta"]["budget"]
    rows = [
        e for e in data["episodes"] if e["arm"] == arm and (e["budget"] == budget or arm == "summary_only")
    ]
    if not rows:
        raise SystemExit(f"{path}: no episodes of arm {arm!r} at B={budget}")
    runs: dict[str, list[float]] = {}
    split: dict[str, str] = {}
    for e in rows:
        runs.setdefault(e["task_id"], []).append(float(e["success"]))
        split[e["task_id"]] = e["split"]
    return {t: sum(v) / len(v) for t, v in runs.items()}, split, {int(e["seed"]) for e in rows}


def contrast(treatment: str, control: str) -> dict:
    from causalcache_lab.eval.stats import paired_difference

    (tpath, tarm), (cpath, carm) = (s.rsplit(":", 1) for s in (treatment, control))
    tscore, split, tseeds = task_scores(Path(tpath), tarm)
    cscore, _, cseeds = task_scores(Path(cpath), carm)
    if tseeds != cseeds or set(tscore) != set(cscore):
        raise SystemExit("the two arms did not run the same tasks under the same policy seeds")
    out = {"treatment": treatment, "versus": control, "policy_seeds": sorted(tseeds)}
    for name in ("memory_critical", "control", "all"):
        ids = [t for t in tscore if name == "all" or split[t] == name]
        est = paired_difference([tscore[t] for t in ids], [cscore[t] for t in ids])
        out[name] = {
            "delta": round(est.value, 4),
            "ci95": [round(est.low, 4), round(est.high, 4)],
            "n": len(ids),
            "helped": sum(tscore[t] > cscore[t] for t in ids),
            "harmed": sum(tscore[t] < cscore[t] for t in ids),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("treatment", help="RESULTS.json:ARM")
    parser.add_argument("control", help="RESULTS.json:ARM")
    args = parser.parse_args(argv)
    print(json.dumps(contrast(args.treatment, args.control), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
