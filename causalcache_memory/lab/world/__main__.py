"""``python -m causalcache_memory.lab.world``: print the simulated policy's calibration as JSON."""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m causalcache_memory.lab.world [--tasks N] [--seed S] [--platform P] [--budget B]``."""
    import argparse
    import json
    import tempfile

    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.lab.world.calibration import calibrate
    from causalcache_memory.lab.world.sim_policy import SimulatedPolicy
    from causalcache_memory.lab.world.tasks import age_histogram, generate_tasks

    parser = argparse.ArgumentParser(description="Calibration of the simulated policy in the synthetic world")
    parser.add_argument("--tasks", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--platform", default="mixed", choices=["mobile", "desktop", "mixed"])
    parser.add_argument("--budget", type=int, default=4)
    args = parser.parse_args(argv)
    tasks = generate_tasks(args.tasks, seed=args.seed, platform=args.platform)
    with tempfile.TemporaryDirectory() as root:
        report = calibrate(tasks, SimulatedPolicy(seed=args.seed), LocalArchive(root), budget=args.budget)
    out = {"budget": args.budget, "arms": report, "evidence_age_histogram": age_histogram(tasks)}
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
