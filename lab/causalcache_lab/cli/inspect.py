"""``causalcache inspect``: what the configured memory would do on your own recorded trajectories.

    causalcache data import agentnet ./agentnet --out ./ds
    causalcache inspect ./ds --config causalcache.yaml --screen-text texts.json --html inspect.html

Replays every trajectory of an imported dataset (causalcache data import; recorded LangGraph threads
through "data import causalcache") through the memory the configuration builds (its allocator, budget B,
guard, threshold), one memory for the whole dataset as one deployment serves many threads. The policy
emits each recorded action. Prints one table per trajectory (each decision: could it swap, declined and
why, with the guard's farthest feature group, how many swaps, which older screens it restored) and a
summary table, then the memory's own warnings. --html writes one self-contained page with the restored
screenshots (click to enlarge) and their screen text. --screen-text gives a JSON object
{"<sha256 of a screenshot>": "<its OCR or accessibility text>"}, stored beside the screens in the
dataset's archive. From Python: causalcache_lab.inspect.inspect_dataset returns the same numbers.
"""

from __future__ import annotations

import argparse
import json
import sys

from causalcache_memory.cli._help import documented_parser

_HELP = "replay your recorded trajectories through the configured memory: what it declines, swaps, restores"


def _run(args: argparse.Namespace) -> int:
    from causalcache_lab.data.dataset import open_dataset
    from causalcache_lab.inspect import inspect_dataset
    from causalcache_lab.inspect.render import decision_table, summary_table, write_html
    from causalcache_memory.allocation.base import check_budget
    from causalcache_memory.config import load_config, parse_config
    from causalcache_memory.errors import ConfigError

    config = load_config(args.config) if args.config else parse_config({})
    if args.budget is not None:
        config = config.model_copy(update={"budget": check_budget(args.budget)})
    texts = None
    if args.screen_text:
        try:
            with open(args.screen_text, encoding="utf-8") as fh:
                texts = json.load(fh)
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"--screen-text {args.screen_text}: {exc}") from None
        if not isinstance(texts, dict) or not all(isinstance(v, str) for v in texts.values()):
            raise ConfigError(f"--screen-text {args.screen_text}: want a JSON object sha256 -> text")

    def progress(i: int, n: int, name: str) -> None:
        if not args.json:
            print(f"[{i}/{n}] replaying {name}", file=sys.stderr)

    report = inspect_dataset(args.dir, config, screen_text=texts, limit=args.limit, progress=progress)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
    else:
        for traj in report.trajectories:
            print(f"\n{traj.trajectory_id} ({traj.platform}): {traj.goal}")
            print(decision_table(traj))
        print(f"\nsummary (allocator {report.allocator}, B = {report.budget})")
        print(summary_table(report))
        for message in report.warnings:
            print(f"\nwarning from the memory: {message}")
    if args.html:
        out = write_html(report, args.html, open_dataset(args.dir).archive(), max_images=args.max_images)
        print(f"\nwrote {out}", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = documented_parser(subparsers, "inspect", help=_HELP, doc=__doc__)
    p.add_argument("dir", help="dataset directory written by causalcache data import")
    p.add_argument("--config", help="the memory's YAML configuration (default: the library's defaults)")
    p.add_argument("--budget", type=int, help="budget B, overriding the configuration's")
    p.add_argument("--screen-text", help="JSON object: screenshot sha256 -> OCR or accessibility text")
    p.add_argument("--limit", type=int, help="replay only the first N trajectories")
    p.add_argument("--html", help="write the self-contained HTML page here")
    p.add_argument("--max-images", type=int, default=200, help="most screenshots embedded in the page")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of tables")
    p.set_defaults(handler=_run)
