"""``causalcache eval <what>``: evaluations. ``eval ladder``: the allocation ladder."""

from __future__ import annotations

import argparse
from pathlib import Path

from causalcache_lab.trust import add_trust_module_argument


def _ladder(args: argparse.Namespace) -> int:
    from causalcache_lab.selector.ladder import format_table, held_out, run_ladder
    from causalcache_lab.selector.recipe import load_recipe, resolve
    from causalcache_memory._jsonl import dumps_json
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    recipe = load_recipe(args.recipe, trusted=args.trust_module)
    res = resolve(recipe)
    model_dir = args.model or recipe.train.output_dir
    learned = OnnxScorer(model_dir)
    ablation_dir = args.no_recency_model or recipe.train.no_recency_output_dir
    no_recency = OnnxScorer(ablation_dir) if ablation_dir and Path(ablation_dir).exists() else None
    trajectories = held_out(
        res.trajectories, model_dir if Path(model_dir).is_dir() else None, recipe.ladder.split
    )
    thumbs = None
    if hasattr(res.archive, "open_image"):
        from causalcache_memory.archive.thumbs import ThumbnailCache

        thumbs = ThumbnailCache(res.archive, size=32)
    report = run_ladder(
        res.policy,
        res.archive,
        trajectories,
        learned=learned,
        no_recency=no_recency,
        thumbnails=thumbs,
        screen_text=res.screen_text,
        config=recipe.ladder_config(),
        progress=not args.no_progress,
    )
    report["model"] = str(model_dir)
    print(format_table(report))
    out = args.json or recipe.ladder.json_path
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(dumps_json(report))
        print(f"wrote {out}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("eval", help="evaluations (allocation ladder, ...)")
    sub = parser.add_subparsers(dest="eval_command", metavar="WHAT", required=True)
    ladder = sub.add_parser("ladder", help="allocation ladder: margin over Recent-B with clustered CIs")
    ladder.add_argument("--recipe", required=True, help="selector recipe YAML")
    ladder.add_argument("--json", help="write the JSON report here (default: recipe ladder.json)")
    ladder.add_argument("--model", help="learned model directory or .onnx (default: recipe train.output_dir)")
    ladder.add_argument("--no-recency-model", help="model retrained without recency features")
    ladder.add_argument("--no-progress", action="store_true")
    add_trust_module_argument(ladder)
    ladder.set_defaults(handler=_ladder)
    from causalcache_lab.cli.demo import register_closed_loop
    from causalcache_lab.cli.train_hgkv import register_did

    register_did(sub)
    register_closed_loop(sub)
