"""``causalcache train hgkv --recipe YAML`` and ``causalcache eval did --recipe YAML``.

``register_hgkv(train_subparsers)`` and ``register_did(eval_subparsers)`` add the subcommands to the
``train`` and ``eval`` command groups. Registration imports nothing heavy.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

__all__ = ["register_did", "register_hgkv"]


def _train(args: argparse.Namespace) -> int:
    from causalcache_lab.hgkv.recipe import load_recipe
    from causalcache_lab.hgkv.run import train_from_recipe

    recipe = load_recipe(args.recipe)
    updates: dict[str, object] = {}
    if args.output_dir:
        updates["output_dir"] = args.output_dir
    if args.arm:
        updates["arm"] = args.arm
    if args.steps:
        updates["train"] = recipe.train.model_copy(update={"steps": args.steps})
    recipe = recipe.model_copy(update=updates)
    result = train_from_recipe(recipe)
    print(f"{recipe.arm}: {result.seconds_per_step * 1000:.0f} ms/step, selected step {result.selected_step}")
    for record in result.history:
        per_b = ", ".join(
            f"B={b}: DiD {d['did_select']['mean']:+.4f} (lo {d['did_select']['lo']:+.4f}) "
            f"|A_r| {d['abs_recent']['mean']:.4f} |A_n| {d['wrong_drift']['mean']:.4f}"
            for b, d in record["dev"].items()
        )
        print(f"  step {record['step']:>5} loss {record['train_loss']:.4f} gates {record['gates']}: {per_b}")
    return 0 if result.selected_step is not None else 3


def _parse_adapters(values: list[str] | None, recipe_output: str) -> dict[str, str]:
    from causalcache_memory.errors import ConfigError

    if not values:
        return {"hgkv": str(Path(recipe_output) / "best")}
    out: dict[str, str] = {}
    for value in values:
        name, sep, path = value.partition("=")
        if not sep or not name or not path:
            raise ConfigError(
                f"--adapter {value!r} must be NAME=DIR, e.g. --adapter ungated=runs/ungated/best"
            )
        out[name] = path
    return out


def _eval(args: argparse.Namespace) -> int:
    from causalcache_lab.hgkv.recipe import load_recipe
    from causalcache_lab.hgkv.run import evaluate_did, format_did_table

    recipe = load_recipe(args.recipe)
    adapters = _parse_adapters(args.adapter, recipe.output_dir)
    report = evaluate_did(recipe, adapters, split=args.split, reps=args.bootstrap, seed=args.seed)
    print(format_did_table(report))
    if args.json:
        Path(args.json).write_text(json.dumps(report.to_dict(), indent=2) + "\n", encoding="utf-8")
    return 0


def register_hgkv(train_subparsers: argparse._SubParsersAction) -> None:
    """Add ``hgkv`` to the ``causalcache train`` command group."""
    p = train_subparsers.add_parser(
        "hgkv", help="train the history-gated K/V adapter (or the ungated control)"
    )
    p.add_argument("--recipe", required=True, help="HGKV recipe YAML (see examples/hgkv_recipe.yaml)")
    p.add_argument("--arm", choices=("hgkv", "ungated"), help="override the recipe's arm")
    p.add_argument("--steps", type=int, help="override train.steps")
    p.add_argument("--output-dir", help="override output_dir")
    p.set_defaults(handler=_train)


def register_did(eval_subparsers: argparse._SubParsersAction) -> None:
    """Add ``did`` to the ``causalcache eval`` command group."""
    p = eval_subparsers.add_parser("did", help="DiD table of HGKV / ungated adapters per budget")
    p.add_argument("--recipe", required=True, help="the HGKV recipe the adapters were trained with")
    p.add_argument(
        "--adapter",
        action="append",
        metavar="NAME=DIR",
        help="adapter to evaluate (repeatable); default: hgkv=<output_dir>/best",
    )
    p.add_argument("--split", default="dev", choices=("train", "dev", "test"))
    p.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json", help="also write the table as JSON here")
    p.set_defaults(handler=_eval)
