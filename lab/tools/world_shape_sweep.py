"""Choose the synthetic world's episode shape on the dev templates (issue 13).

The rule and the candidates are fixed in ``docs/results/world_shape_rule.md`` (written before this tool
produced any number). For each candidate shape (errands before / between / after the read, control
browsing), this runs the single-process closed loop on dev-template mobile tasks under every arm and policy
seed, and reports per split: mean plan length, evidence ages, success, and task-paired contrasts against
Recent-B with a task bootstrap. It then applies the rule and names the chosen shape.

    python lab/tools/world_shape_sweep.py --out docs/results/world_shape_dev.json            # all candidates
    python lab/tools/world_shape_sweep.py --candidates S0,S3 --tasks 60 --seeds 0            # a quick look

No evaluation template is generated here.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

#: name -> (before read, between reads, after read, control browse): inclusive errand ranges
CANDIDATES: dict[str, tuple[tuple[int, int], ...]] = {
    "S0": ((0, 3), (1, 2), (0, 3), (1, 2)),
    "S1": ((1, 4), (1, 2), (1, 3), (1, 3)),
    "S2": ((2, 5), (1, 3), (1, 3), (1, 4)),
    "S3": ((2, 6), (1, 3), (1, 4), (2, 5)),
    "S4": ((3, 7), (2, 4), (2, 4), (2, 6)),
    "S5": ((4, 8), (2, 4), (2, 5), (3, 7)),
}
ARMS = ("summary_only", "recent", "random", "first", "evenly_spaced", "oracle")
POSITIONAL = ("random", "first", "evenly_spaced")
HORIZON = (15.0, 30.0)  # the paper's step caps: OSWorld official 15, extended 30
MAX_POSITIONAL_GAIN = 0.05
MIN_ORACLE_GAIN = 0.40


def apply_shape(shape: tuple[tuple[int, int], ...]) -> None:
    from causalcache_lab.world import tasks

    (
        tasks.ERRANDS_BEFORE_READ,
        tasks.ERRANDS_BETWEEN_READS,
        tasks.ERRANDS_AFTER_READ,
        tasks.CONTROL_BROWSE_ERRANDS,
    ) = shape


def _run(job: tuple[str, int, int, int, str, int]) -> dict:
    """One (candidate, policy seed) job: every arm on every task; per-task successes."""
    name, n_tasks, task_seed, policy_seed, templates, budget = job
    from causalcache_lab.world.calibration import EvidenceOracleAllocator, run_episode
    from causalcache_lab.world.sim_policy import SimulatedPolicy
    from causalcache_lab.world.tasks import generate_tasks
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.archive import LocalArchive

    apply_shape(CANDIDATES[name])
    tasks = generate_tasks(n_tasks, seed=task_seed, platform="mobile", templates=templates)
    policy = SimulatedPolicy(seed=policy_seed)
    out: dict[str, dict[str, bool]] = {}
    with tempfile.TemporaryDirectory() as root:
        archive = LocalArchive(root)
        for arm in ARMS:
            make = EvidenceOracleAllocator if arm == "oracle" else (lambda a=arm: build_allocator(a))
            out[arm] = {
                t.task_id: run_episode(t, make(), policy, archive, budget=budget).success for t in tasks
            }
    meta = {
        t.task_id: {
            "split": t.split,
            "plan_len": len(t.steps),
            "age": t.evidence_age,
            "template": t.template,
        }
        for t in tasks
    }
    return {"candidate": name, "seed": policy_seed, "success": out, "tasks": meta}


def summarize(name: str, runs: list[dict], budget: int) -> dict:
    from causalcache_lab.eval.stats import cluster_bootstrap, paired_difference

    meta = runs[0]["tasks"]
    ids = {
        split: [i for i, m in meta.items() if m["split"] == split] for split in ("memory_critical", "control")
    }
    score = {arm: {i: statistics.fmean(r["success"][arm][i] for r in runs) for i in meta} for arm in ARMS}
    mem = ids["memory_critical"]
    ages = [meta[i]["age"] for i in mem if meta[i]["age"] is not None]
    report: dict = {
        "shape": dict(
            zip(
                ("before_read", "between_reads", "after_read", "control_browse"),
                CANDIDATES[name],
                strict=True,
            )
        ),
        "plan_len_mean": {s: statistics.fmean(meta[i]["plan_len"] for i in v) for s, v in ids.items()},
        "evidence_age_mean": statistics.fmean(ages),
        "evidence_in_window": sum(a <= budget for a in ages) / len(ages),
        "arms": {},
    }
    for arm in ARMS:
        row = {}
        for split, v in ids.items():
            est = cluster_bootstrap([score[arm][i] for i in v])
            row[split] = {"success": round(est.value, 4), "ci": [round(est.low, 4), round(est.high, 4)]}
            if arm != "recent":
                d = paired_difference([score[arm][i] for i in v], [score["recent"][i] for i in v])
                row[split]["delta_vs_recent"] = round(d.value, 4)
                row[split]["delta_ci"] = [round(d.low, 4), round(d.high, 4)]
                row[split]["helped"] = sum(score[arm][i] > score["recent"][i] for i in v)
                row[split]["harmed"] = sum(score[arm][i] < score["recent"][i] for i in v)
        report["arms"][arm] = row
    gains = {a: report["arms"][a]["memory_critical"]["delta_vs_recent"] for a in POSITIONAL}
    report["max_positional_gain"] = max(gains.values())
    report["oracle_gain"] = report["arms"]["oracle"]["memory_critical"]["delta_vs_recent"]
    return report


def choose(reports: dict[str, dict]) -> tuple[str | None, str]:
    """The rule of docs/results/world_shape_rule.md."""
    in_range = {
        n: r for n, r in reports.items() if HORIZON[0] <= r["plan_len_mean"]["memory_critical"] <= HORIZON[1]
    }
    ok = [
        n
        for n, r in in_range.items()
        if r["max_positional_gain"] <= MAX_POSITIONAL_GAIN and r["oracle_gain"] >= MIN_ORACLE_GAIN
    ]
    if ok:
        best = min(ok, key=lambda n: in_range[n]["plan_len_mean"]["memory_critical"])
        return best, "shortest candidate in the horizon range meeting both conditions"
    fallback = [n for n, r in in_range.items() if r["oracle_gain"] >= MIN_ORACLE_GAIN]
    if not fallback:
        return None, "no candidate in the horizon range keeps the oracle gain"
    best = min(fallback, key=lambda n: in_range[n]["max_positional_gain"])
    return (
        best,
        "no candidate meets both; smallest largest positional gain among those keeping the oracle gain",
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", default=",".join(CANDIDATES))
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--task-seed", type=int, default=11)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--templates", default="dev", choices=["train", "dev"])
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    names = [n for n in args.candidates.split(",") if n]
    seeds = [int(s) for s in args.seeds.split(",")]
    jobs = [(n, args.tasks, args.task_seed, s, args.templates, args.budget) for n in names for s in seeds]
    start = time.perf_counter()
    with ProcessPoolExecutor(args.workers) as pool:
        results = list(pool.map(_run, jobs))
    reports = {n: summarize(n, [r for r in results if r["candidate"] == n], args.budget) for n in names}
    chosen, why = choose(reports)
    out = {
        "rule": "docs/results/world_shape_rule.md",
        "command": "python lab/tools/world_shape_sweep.py "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "templates": args.templates,
        "platform": "mobile",
        "tasks": args.tasks,
        "task_seed": args.task_seed,
        "policy_seeds": seeds,
        "budget": args.budget,
        "wall_s": round(time.perf_counter() - start, 1),
        "candidates": reports,
        "chosen": chosen,
        "why": why,
    }
    text = json.dumps(out, indent=1)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    for n, r in reports.items():
        mc = r["arms"]
        print(
            f"{n}: plan {r['plan_len_mean']['memory_critical']:.1f}/{r['plan_len_mean']['control']:.1f} "
            f"age {r['evidence_age_mean']:.1f} in-window {r['evidence_in_window']:.2f} | recent "
            f"{mc['recent']['memory_critical']['success']:.2f} ctrl {mc['recent']['control']['success']:.2f} | "
            + " ".join(
                f"{a} {mc[a]['memory_critical']['delta_vs_recent']:+.2f}"
                for a in ("summary_only", *POSITIONAL, "oracle")
            )
            + f" | ctrl max|d| {max(abs(mc[a]['control']['delta_vs_recent']) for a in POSITIONAL):.2f}"
        )
    print(f"chosen: {chosen} ({why}); {out['wall_s']} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
