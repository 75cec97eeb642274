"""Format-2 twin of a trained selector: the same ONNX scorer with the pre-issue-24 threshold and guard.

For RESULTS.md 8b: measures what the earlier rules (the 1%-of-non-improving-swaps threshold and the
Mahalanobis guard over all 45 columns) do on the same scorer and the same labels. The earlier
``calibrate.py`` is read from git, not kept in the package::

    git show ba349b3:lab/causalcache_lab/selector/calibrate.py > /tmp/legacy_calibrate.py
    python lab/tools/selector_format2_twin.py RECIPE MODEL_DIR OUT_DIR /tmp/legacy_calibrate.py

``OUT_DIR/selector.onnx`` then loads as a format-2 model (stored threshold, Mahalanobis guard).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("recipe", "model_dir", "out_dir", "legacy_calibrate"):
        parser.add_argument(name)
    args = parser.parse_args()

    import onnx

    from causalcache_lab.selector.checkpoint import load_model
    from causalcache_lab.selector.labels import read_labels
    from causalcache_lab.selector.recipe import load_recipe, resolve
    from causalcache_lab.selector.train import _split, _state_diffs, build_examples
    from causalcache_memory.selector.features import FeatureExtractor

    spec = importlib.util.spec_from_file_location("legacy_calibrate", args.legacy_calibrate)
    assert spec is not None and spec.loader is not None
    legacy = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(legacy)
    recipe = load_recipe(args.recipe)
    res = resolve(recipe, need_policy=False)
    _, records = read_labels(recipe.labels.output)
    cfg = recipe.train_config()
    trajectories = {t.trajectory_id: t for t in res.trajectories}
    examples = build_examples(
        records, trajectories, extractor=FeatureExtractor(), witness=cfg.witness, seed=cfg.seed
    )
    parts = _split(examples, cfg)
    model, _ = load_model(args.model_dir)
    calibration = legacy.calibrate_threshold(_state_diffs(model, parts["dev"]), parts["dev"])
    guard, report = legacy.fit_ood(parts["train"], parts["dev"], cfg.drop_features)
    print(
        f"format-2 rules: min_gain {calibration['min_gain']:.4f} (dev fire {calibration['dev_fire_rate']:.3f}); "
        f"OOD threshold {report['threshold']:.2f}, dev flagged {report.get('dev_flagged', float('nan')):.3f}"
    )
    new = {
        "causalcache.calibration": json.dumps(calibration, sort_keys=True),
        "causalcache.ood": guard.to_json(),
        "causalcache.model_format_version": "2",
    }
    proto = onnx.load(str(Path(args.model_dir) / "selector.onnx"))
    for prop in proto.metadata_props:
        prop.value = new.get(prop.key, prop.value)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    onnx.save(proto, str(out / "selector.onnx"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
