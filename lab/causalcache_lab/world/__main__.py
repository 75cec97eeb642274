"""``python -m causalcache_lab.world``: the calibration table as JSON (mean over policy seeds)."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m causalcache_lab.world [--tasks N] [--seed S] [--platform P] [--budget B]
    [--templates T] [--seeds 0,1,2] [--arms summary_only,recent,oracle]``."""
    import argparse
    import json
    import tempfile

    from causalcache_lab.world.calibration import EvidenceOracleAllocator, calibrate
    from causalcache_lab.world.sim_policy import SimulatedPolicy
    from causalcache_lab.world.tasks import age_histogram, generate_tasks
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.archive import LocalArchive

    parser = argparse.ArgumentParser(description="Calibration of the simulated policy in the synthetic world")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="task seed")
    parser.add_argument("--platform", default="mobile", choices=["mobile", "desktop", "mixed"])
    parser.add_argument("--templates", default="eval", choices=["train", "dev", "eval", "all"])
    parser.add_argument("--budget", type=int, default=4)
    parser.add_argument("--seeds", default="0,1,2", help="simulated-policy seeds (the table is their mean)")
    parser.add_argument(
        "--arms", default="summary_only,recent,oracle", help="also: random,first,evenly_spaced"
    )
    args = parser.parse_args(argv)
    tasks = generate_tasks(args.tasks, seed=args.seed, platform=args.platform, templates=args.templates)
    arms = {
        a: (EvidenceOracleAllocator if a == "oracle" else (lambda a=a: build_allocator(a)))
        for a in args.arms.split(",")
    }
    seeds = [int(s) for s in args.seeds.split(",")]
    per_seed = []
    with tempfile.TemporaryDirectory() as root:
        for seed in seeds:
            per_seed.append(
                calibrate(
                    tasks, SimulatedPolicy(seed=seed), LocalArchive(root), budget=args.budget, arms=arms
                )
            )
    mean = {
        arm: {key: sum(r[arm][key] for r in per_seed) / len(per_seed) for key in per_seed[0][arm]}
        for arm in per_seed[0]
    }
    out = {
        "budget": args.budget,
        "templates": args.templates,
        "platform": args.platform,
        "policy_seeds": seeds,
        "arms": mean,
        "per_seed": per_seed,
        "evidence_age_histogram": age_histogram(tasks),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
