"""``causalcache train selector --recipe YAML``: train, select on dev, export the set scorer."""

from __future__ import annotations

import argparse
import json

from causalcache_lab.trust import add_trust_module_argument


def _extractor(recipe, archive, images: bool = True, screen_text=None):  # type: ignore[no-untyped-def]
    from causalcache_memory.selector.features import FeatureExtractor

    if not images or not recipe.train.image_features or not hasattr(archive, "open_image"):
        return FeatureExtractor(screen_text=screen_text)
    from causalcache_memory.archive.thumbs import ThumbnailCache

    return FeatureExtractor(ThumbnailCache(archive, size=32), screen_text=screen_text)


def _train_selector(args: argparse.Namespace) -> int:
    from causalcache_lab.selector.labels import read_labels
    from causalcache_lab.selector.recipe import RECENCY_FEATURES, load_recipe, resolve
    from causalcache_lab.selector.train import build_examples, train_selector
    from causalcache_memory.selector.schema import TEXT_FEATURES

    recipe = load_recipe(args.recipe, trusted=args.trust_module)
    res = resolve(recipe, need_policy=False)
    labels = args.labels or recipe.labels.output
    header, records = read_labels(labels)
    overrides = {"epochs": args.epochs} if args.epochs else {}
    runs = [(args.output_dir or recipe.train.output_dir, recipe.train_config(**overrides))]
    base = recipe.train_config(**overrides)
    ablations = [(recipe.train.no_recency_output_dir, RECENCY_FEATURES)]
    ablations.append((recipe.train.no_text_output_dir, TEXT_FEATURES))
    for ablation_dir, names in ablations if not args.skip_ablation else ():
        if ablation_dir:
            drop = tuple(dict.fromkeys((*base.drop_features, *names)))
            runs.append((ablation_dir, recipe.train_config(**overrides, drop_features=drop)))
    trajectories = {t.trajectory_id: t for t in res.trajectories}
    extractor = _extractor(recipe, res.archive, not args.no_image_features, res.screen_text)
    examples = build_examples(
        records,
        trajectories,
        extractor=extractor,
        witness=runs[0][1].witness,
        seed=runs[0][1].seed,
    )
    for output_dir, cfg in runs:
        result = train_selector(
            examples,
            cfg,
            output_dir=output_dir,
            data_description=recipe.train.description,
            label_header=header,
            image_features=extractor.thumbnails is not None,
            log=print if args.verbose else None,
        )
        meta = result.metadata
        print(f"{output_dir}: best epoch {meta['best_epoch']}, states {meta['states']}")
        print(
            "  " + json.dumps({k: {n: round(v, 5) for n, v in d.items()} for k, d in meta["metrics"].items()})
        )
        cal, ood = meta["calibration"], meta["ood"]
        guard = (
            f"OOD threshold {ood['threshold']:.2f}, dev flagged {ood.get('dev_flagged', float('nan')):.3f}"
            if "guard" in ood
            else f"no OOD guard ({ood['skipped']})"
        )
        print(
            f"  min_gain (auto, pass-2 share {cal['second_pass_share']:g}) {cal['min_gain']:.4f} on "
            f"{cal['split']}: dev fire rate {cal['dev_fire_rate']:.3f}, dev gain {cal['dev_gain']:.4f} "
            f"(at 0: {cal['dev_fire_rate_at_0']:.3f}, {cal['dev_gain_at_0']:.4f}); {guard}"
        )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("train", help="train learned components")
    sub = parser.add_subparsers(dest="train_command", metavar="WHAT", required=True)
    sel = sub.add_parser("selector", help="train the set-conditional selector scorer from a labels file")
    sel.add_argument("--recipe", required=True, help="selector recipe YAML")
    sel.add_argument("--labels", help="labels file (default: recipe labels.output)")
    sel.add_argument("--output-dir", help="model directory (default: recipe train.output_dir)")
    sel.add_argument("--epochs", type=int, default=None, help="override train.epochs")
    sel.add_argument(
        "--skip-ablation", action="store_true", help="do not train the ablations (no recency, no screen text)"
    )
    sel.add_argument(
        "--no-image-features",
        action="store_true",
        help="train without thumbnail statistics (the deployed selector then reads no pixels)",
    )
    sel.add_argument("-v", "--verbose", action="store_true", help="print per-epoch losses")
    add_trust_module_argument(sel)
    sel.set_defaults(handler=_train_selector)
    from causalcache_lab.cli.train_hgkv import register_hgkv

    register_hgkv(sub)
