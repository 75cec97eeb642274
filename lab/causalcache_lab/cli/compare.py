"""``causalcache compare``: the deployed selector against the one ``allocation.compare`` runs, on live episodes.

    causalcache compare --threads .causalcache/checkpoints.sqlite --archive .causalcache/archive \\
        --success success.json

Reads the recorded threads (the memory's checkpointer and archive) and the team's success labels (a JSON
object ``{"thread id": true, ...}`` or a CSV ``thread_id,success``), splits them by the selector each
episode ran, and prints both success rates and the difference with a bootstrap interval
(:mod:`causalcache_lab.learn.compare`; docs/LEARN.md, "Compare before switching"). With shadow
decisions recorded (``allocation.compare.shadow``, the default) the verdict is judged on the episodes where
the two selectors disagreed at some step, which needs about half as many episodes.
``--fail-if-worse`` exits 1 when the deployed selector is shown worse.
"""

from __future__ import annotations

import argparse

from causalcache_memory.cli._help import documented_parser

#: the command's line in ``causalcache --help``
_HELP = "success of the deployed selector against the one allocation.compare runs, on recorded threads"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = documented_parser(subparsers, "compare", help=_HELP, doc=__doc__)
    p.add_argument(
        "--threads", required=True, help="the memory's checkpointer: SQLite path or postgresql:// URI"
    )
    p.add_argument("--archive", required=True, help="the memory's archive (folder or URL)")
    p.add_argument("--success", required=True, help="success labels per thread: JSON object or CSV file")
    p.add_argument("--confidence", type=float, default=0.95, help="two-sided interval level (default 0.95)")
    p.add_argument("--min-episodes", type=int, default=20, help="fewest labelled episodes per arm to judge")
    p.add_argument(
        "--looks", type=int, default=1,
        help="how many times you will run this comparison as episodes come in; each look's interval is "
        "widened so that all of them together keep --confidence (default 1: judged once)",
    )  # fmt: skip
    p.add_argument("--fail-if-worse", action="store_true", help="exit 1 when the deployed selector is worse")
    p.add_argument("--json", action="store_true", help="also print the comparison as JSON")
    p.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from causalcache_lab.learn.compare import compare_threads
    from causalcache_memory._jsonl import dumps_json

    result = compare_threads(
        args.threads,
        args.archive,
        args.success,
        confidence=args.confidence,
        min_episodes=args.min_episodes,
        looks=args.looks,
    )
    print(result.message)
    if result.left_out:
        print("left out: " + ", ".join(f"{k} {v}" for k, v in sorted(result.left_out.items())))
    if args.json:
        print(dumps_json(result.to_dict()))
    return 1 if args.fail_if_worse and result.verdict == "worse" else 0
