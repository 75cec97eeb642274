"""``causalcache label selector --recipe YAML``: selector labels from true policy utilities."""

from __future__ import annotations

import argparse


def _label_selector(args: argparse.Namespace) -> int:
    from causalcache_memory.lab.selector.labels import run_labelling
    from causalcache_memory.lab.selector.recipe import load_recipe, resolve

    recipe = load_recipe(args.recipe)
    res = resolve(recipe)
    output = args.output or recipe.labels.output
    counts = run_labelling(
        res.policy,
        res.archive,
        res.trajectories,
        output,
        recipe.labels.label_config(),
        progress=not args.no_progress,
        max_states=args.max_states,
    )
    print(
        f"{output}: {counts['written']} new records ({counts['skipped']} already present of "
        f"{counts['planned']} planned), {counts['prompts']} prompts scored"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("label", help="generate training labels (selector utilities)")
    sub = parser.add_subparsers(dest="label_command", metavar="WHAT", required=True)
    sel = sub.add_parser(
        "selector",
        help="score complete exact-B allocations with the recipe's policy; resumable JSONL output",
    )
    sel.add_argument(
        "--recipe", required=True, help="selector recipe YAML (see examples/selector_recipe.yaml)"
    )
    sel.add_argument("--output", help="labels file (default: recipe labels.output); appended and resumed")
    sel.add_argument("--max-states", type=int, default=None, help="stop after this many new records")
    sel.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    sel.set_defaults(handler=_label_selector)
