"""Offline fine-tune probe: the dev value of fine-tunes of the bundled selector on a ``learn`` run's labels.

Development worlds only (RESULTS.md 9f). Rebuilds the run's training examples with the world's screen text
(as ``learn`` does since 9f), then fine-tunes the bundled selector under a few TrainConfigs without the
gate and prints each one's dev value by epoch; epoch 0 is the base.

    python tools/learn_offline_probe.py runs/s5/t-devage-01-A runs/s5/devage-01/record
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

PROBES = {
    "lr3e-4": {},
    "lr1e-4": {"lr": 1e-4},
    "lr3e-5": {"lr": 3e-5},
    "rank-only": {"huber_delta": 1e-6, "lr": 1e-4},
    "lr1e-3": {"lr": 1e-3},
}


def main(argv: list[str]) -> int:
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.lab.data.trajectory import load_trajectories
    from causalcache_memory.lab.learn.mix import mix_labels
    from causalcache_memory.lab.selector.train import TrainConfig, build_examples, train_selector
    from causalcache_memory.lab.selector.world_text import WorldScreenText
    from causalcache_memory.selector.features import FeatureExtractor

    run, rec = Path(argv[0]), Path(argv[1])
    learn = run / "learn-teacher_forced"
    trajs = list(load_trajectories(learn / "trajectories/trajectories.jsonl"))
    archive = LocalArchive(rec / "archive-recent-b4-s0")
    _, records = mix_labels(
        {"teacher_forced": learn / "labels-teacher_forced/labels.jsonl"}, {"teacher_forced": 1.0}
    )
    extractor = FeatureExtractor(screen_text=WorldScreenText(archive))
    examples = build_examples(
        records, {t.trajectory_id: t for t in trajs}, extractor=extractor, witness="gold", seed=0
    )
    splits = json.loads((learn / "model/model/metadata.json").read_text())["train"]["splits"]
    positive = sum(1 for e in examples if np.any(e.y > 1e-6))
    print(f"states {len(examples)}, with a positive label {positive}")
    for name, extra in PROBES.items():
        start = time.perf_counter()
        cfg = TrainConfig(
            **{"init_from": "bundled", "lr": 3e-4, "splits": splits, "fine_tune_gate": None, **extra}
        )
        meta = train_selector(examples, cfg, export_onnx=False).metadata
        history = [(h["epoch"], round(h["dev"]["value"], 3)) for h in meta["history"][:8]]
        dev = meta["metrics"]["dev"]
        print(
            f"{name}: best epoch {meta['best_epoch']}, dev value {dev['value']:.3f} (oracle {dev['oracle']:.3f}); "
            f"by epoch {history} ({time.perf_counter() - start:.1f} s)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
