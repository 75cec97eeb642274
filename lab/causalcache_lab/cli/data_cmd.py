"""``causalcache data import|stats|mine``: real trajectories in (docs/DATA.md)."""

from __future__ import annotations

import argparse
import json


def _budgets(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} must be comma-separated integers such as 1,2,4") from None
    return values


def _import(args: argparse.Namespace) -> int:
    from causalcache_lab.data.dataset import import_dataset

    options = {
        "images": args.images,
        "examples": args.examples,
        "metadata": args.metadata,
        "source_archive": args.source_archive,
        "coords": args.coords,
    }
    manifest = import_dataset(
        args.format, args.src, args.out, radius=args.radius, force=args.force, **options
    )
    r = manifest["report"]
    print(
        f"{args.out}: {r['trajectories']} trajectories ({r['successes']} successful), {r['steps']} steps, "
        f"{r['screens']} distinct screenshots, {r['unparsed']} unparsed actions kept"
    )
    if r["missing_first_screen"] or r["missing_last_screen"]:
        print(
            f"  screens not stored by the dataset: x_1 in {r['missing_first_screen']}, "
            f"x_(T+1) in {r['missing_last_screen']} trajectories (see docs/DATA.md)"
        )
    for note, n in r["notes"].items():
        print(f"  note: {note}: {n}")
    for example in r["unparsed_examples"][:5]:
        print(f"  unparsed: {example}")
    return 0


def _stats(args: argparse.Namespace) -> int:
    from causalcache_lab.data.dataset import dataset_stats

    stats = dataset_stats(args.dir, groups=args.groups)
    if args.json:
        print(json.dumps(stats, indent=2, ensure_ascii=False))
        return 0
    print(f"format: {stats['format']}  platforms: {stats['platforms']}")
    print(f"tasks: {stats['tasks']}  steps: {stats['steps']}  successes: {stats['successes']}")
    print(
        f"unparsed actions: {stats['unparsed_actions']}  steps with an app label: {stats['steps_with_app']}"
    )
    print(f"trajectory splits (successful): {stats['splits']}")
    if stats["task_splits"]:
        print(f"task-metadata splits: {stats['task_splits']}")
    if "groups_per_budget" in stats:
        held = set(stats["held_out_budgets"])
        per_b = ", ".join(
            f"B={b}: {n}" + (" (held out)" if int(b) in held else "")
            for b, n in stats["groups_per_budget"].items()
        )
        print(f"groups ({stats['groups_file']}): {per_b}; per split {stats['groups_per_split']}")
    else:
        print("groups: none mined yet (causalcache data mine DIR --out GROUPS.jsonl)")
    return 0


def _mine(args: argparse.Namespace) -> int:
    from causalcache_lab.data.dataset import mine_dataset

    report = mine_dataset(
        args.dir,
        args.out,
        budgets=args.budgets,
        held_out_budgets=args.held_out,
        radius=args.radius,
        dev=args.dev,
        test=args.test,
        salt=args.salt,
    )
    print(f"{args.out}: {report.summary()}")
    print(
        f"  no age-matched wrong restore: {report.no_wrong}; unparsed steps skipped: {report.unparsed_steps}"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    from causalcache_lab.data.loaders import available_loaders  # the formats: the loader registry

    parser = subparsers.add_parser(
        "data", help="import real trajectories, inspect them, mine replacement groups"
    )
    sub = parser.add_subparsers(dest="data_command", metavar="WHAT", required=True)

    imp = sub.add_parser(
        "import", help="load a dataset into DIR (trajectories.jsonl + archive/ + dataset.json)"
    )
    imp.add_argument("format", choices=available_loaders(), help="upstream format")
    imp.add_argument("src", help="dataset file or folder")
    imp.add_argument("--out", required=True, help="output dataset directory")
    imp.add_argument("--images", help="agentnet: folder of the step images (default SRC/images, SRC)")
    imp.add_argument("--examples", help="osworld: evaluation_examples/examples (task instructions)")
    imp.add_argument("--metadata", help="mobileworld: task metadata JSON with app_names")
    imp.add_argument(
        "--coords",
        choices=("auto", "absolute", "relative", "thousand"),
        help="mobileworld: coordinate system of the actions (default auto: decided once per trajectory "
        "from all its points and the screen size, recorded in metadata.coords)",
    )
    imp.add_argument("--source-archive", help="causalcache: the deployment's archive (path or URL)")
    imp.add_argument(
        "--radius", type=float, help="mining pointer tolerance, relative units (default per format)"
    )
    imp.add_argument("--force", action="store_true", help="overwrite an existing dataset in --out")
    imp.set_defaults(handler=_import)

    st = sub.add_parser("stats", help="tasks, steps, successes, splits, unparsed actions, groups per B")
    st.add_argument("dir", help="dataset directory written by data import")
    st.add_argument("--groups", help="groups JSONL (default: the last one data mine wrote)")
    st.add_argument("--json", action="store_true", help="print JSON")
    st.set_defaults(handler=_stats)

    mine = sub.add_parser("mine", help="mine matched-budget replacement groups (recent / relevant / wrong)")
    mine.add_argument("dir", help="dataset directory written by data import")
    mine.add_argument("--out", required=True, help="groups JSONL to write")
    mine.add_argument("--budgets", type=_budgets, default=(1, 2, 4), help="training budgets (default 1,2,4)")
    mine.add_argument(
        "--held-out", type=_budgets, default=(8,), help="budgets built but held out (default 8)"
    )
    mine.add_argument(
        "--radius", type=float, help="pointer tolerance, relative units (default: the dataset's)"
    )
    mine.add_argument("--dev", type=float, default=0.15, help="dev fraction of trajectories")
    mine.add_argument("--test", type=float, default=0.15, help="test fraction of trajectories")
    mine.add_argument("--salt", default="", help="split salt (trajectory-level, from sha256(salt + id))")
    mine.set_defaults(handler=_mine)
