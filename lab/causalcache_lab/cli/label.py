"""``causalcache label selector --recipe YAML``: selector labels from true policy utilities."""

from __future__ import annotations

import argparse

from causalcache_lab.trust import add_trust_module_argument


def _label_selector(args: argparse.Namespace) -> int:
    from causalcache_lab.selector.labels import run_labelling
    from causalcache_lab.selector.recipe import load_recipe, resolve

    recipe = load_recipe(args.recipe, trusted=args.trust_module)
    res = resolve(recipe)
    output = args.output or recipe.labels.output
    if args.concurrency > 1:
        return _label_fleet(args, res, recipe, output)
    counts = run_labelling(
        res.policy,
        res.archive,
        res.trajectories,
        output,
        recipe.labels.label_config(),
        progress=not args.no_progress,
        max_states=args.max_states,
        force_labeller=args.force_labeller,
    )
    print(
        f"{output}: {counts['written']} new records ({counts['skipped']} already present of "
        f"{counts['planned']} planned), {counts['prompts']} prompts scored"
    )
    return 0


def _label_fleet(args: argparse.Namespace, res: object, recipe: object, output: str) -> int:
    from causalcache_lab.selector.label_fleet import run_labelling_fleet

    policy = res.policy  # type: ignore[attr-defined]
    try:
        counts = run_labelling_fleet(
            policy,
            res.archive,  # type: ignore[attr-defined]
            res.trajectories,  # type: ignore[attr-defined]
            output,
            recipe.labels.label_config(),  # type: ignore[attr-defined]
            concurrency=args.concurrency,
            retries=args.retries,
            progress=not args.no_progress,
            max_states=args.max_states,
            force_labeller=args.force_labeller,
        )
    finally:
        close = getattr(policy, "close", None)
        if callable(close):  # HTTP runtimes hold a connection pool
            close()
    print(
        f"{output}: {counts['written']} new records ({counts['skipped']} already present of "
        f"{counts['planned']} planned, {counts['failed']} failed after {counts['retries']} retries), "
        f"{counts['prompts']} prompts scored in {counts['seconds']:.1f} s "
        f"({counts['states_per_s']:.2f} states/s, {counts['prompts_per_s']:.1f} prompts/s)"
    )
    for error in counts["errors"]:
        print(f"  failed: {error}")
    return 1 if counts["failed"] else 0


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
    sel.add_argument(
        "--concurrency",
        type=int,
        default=1,
        help="states labelled at once against a fleet (>1: bounded in-flight requests, retries; "
        "failed states are left for the next run); default 1 = one after another",
    )
    sel.add_argument("--retries", type=int, default=2, help="retries of a state after a transient error")
    sel.add_argument(
        "--force-labeller",
        action="store_true",
        help="accept the simulated world policy as the labeller of data not from the synthetic world",
    )
    add_trust_module_argument(sel)
    sel.set_defaults(handler=_label_selector)
