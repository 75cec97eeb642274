"""The held-out worlds with the action normaliser's ``command`` rule removed (issue 54's last done-when row).

The normaliser (``causalcache_memory.selector.schema.action_type_group``) maps a point-less ``type`` whose text
is a navigation command (``open Shop``, ``go back``) to the ``app`` / ``nav`` family. Its two regexes are
exactly the world family's command verbs, so the held-out worlds, which share that vocabulary, may look in
distribution through this rule alone. This tool runs the closed loop on the held-out worlds (the demo's
tasks) with both regexes replaced by one that never matches, in this process only (``workers`` 1), and
prints the same table as ``causalcache demo``.

    python lab/tools/command_rule_ablation.py --seeds 0,1,2 --out runs/no_command_rule

``--keep-rule`` runs the same evaluation with the rule, for the paired comparison.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

NEVER = re.compile(r"(?!)")


def remove_command_rule() -> None:
    """Replace the normaliser's typed-command regexes by one that never matches (this process only)."""
    from causalcache_memory.selector import schema

    schema._TYPED_APP = NEVER
    schema._TYPED_NAV = NEVER


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tasks", type=int, default=120)
    parser.add_argument("--seed", type=int, default=1234, help="task seed (the demo's)")
    parser.add_argument("--seeds", default="0", help="policy seeds, comma-separated")
    parser.add_argument("--arms", default="recent,random,causalcache")
    parser.add_argument("--keep-rule", action="store_true", help="leave the rule in (the comparison run)")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)

    from causalcache_lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop
    from causalcache_lab.eval.report import format_table

    if not args.keep_rule:
        remove_command_rule()
    settings = ClosedLoopSettings(
        tasks=args.tasks,
        seed=args.seed,
        budget=4,
        arms=tuple(args.arms.split(",")),
        policy_seeds=tuple(int(s) for s in args.seeds.split(",")),
        worlds="heldout",
        workers=1,
    )
    out = Path(args.out)
    results = run_closed_loop(settings, out, progress=False)
    results["meta"]["command_rule"] = "kept" if args.keep_rule else "removed"
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    print(f"command rule {'kept' if args.keep_rule else 'removed'}")
    print(format_table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
