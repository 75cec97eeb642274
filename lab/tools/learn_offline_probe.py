"""Offline fine-tune probe: the dev value of fine-tunes of the bundled selector on a ``learn`` run's labels.

Development worlds only (RESULTS.md 9f). Rebuilds the run's training examples with the world's screen text
(as ``learn`` does since 9f), then fine-tunes the bundled selector under a few TrainConfigs without the
gate and prints each one's dev value by epoch; epoch 0 is the base. ``--signal-only`` keeps only the
training states with a swap that raises the label (dev and test unchanged).

``--ship JSON`` instead asks what ``learn`` would ship (RESULTS.md 9g): for each ``{name: train settings}``
it fine-tunes with learn's fine-tuning defaults (loss and rate, ``lab/learn/config.py``) updated by those
settings, the fine-tune gate on, and prints the chosen epoch, the gate's verdict and interval, and the dev
value by epoch (epoch 0 = the bundle; "the bundle" = learn would hand it back).

    python lab/tools/learn_offline_probe.py runs/s5/t-devage-01-A runs/s5/devage-01/record
    python lab/tools/learn_offline_probe.py runs/s5/devage-02-sel1200 runs/s5/devage-02-sel1200/record --signal-only
    python lab/tools/learn_offline_probe.py RUN RUN/record --ship '{"default": {}, "k0.05": {"decision_keep_weight": 0.05}}'
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
    from causalcache_lab.data.split import trajectory_split
    from causalcache_lab.data.trajectory import load_trajectories
    from causalcache_lab.learn.mix import mix_labels
    from causalcache_lab.selector.train import TrainConfig, build_examples, train_selector
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.selector.features import FeatureExtractor

    signal_only = "--signal-only" in argv
    argv = [a for a in argv if a != "--signal-only"]
    ship = None
    if "--ship" in argv:
        at = argv.index("--ship")
        ship, argv = json.loads(argv[at + 1]), argv[:at] + argv[at + 2 :]
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
    if signal_only:  # the hash split of learn's defaults (salt ''): drop training states without a gain
        split = lambda e: trajectory_split(e.trajectory_id, dev=splits[1], test=splits[2], salt="")  # noqa: E731
        examples = [e for e in examples if split(e) != "train" or np.any(e.y > 0)]
        print(f"signal-only: {len(examples)} states kept")
    if ship is not None:
        return _ship(examples, splits, ship)
    for name, extra in PROBES.items():
        start = time.perf_counter()
        base = {"init_from": "bundled", "lr": 3e-4, "splits": splits, "fine_tune_gate": None}
        if signal_only:  # a probe of the dev value only: the guard's size rule does not apply
            base["min_train_states"] = 2
        cfg = TrainConfig(**{**base, **extra})
        meta = train_selector(examples, cfg, export_onnx=False).metadata
        history = [(h["epoch"], round(h["dev"]["value"], 3)) for h in meta["history"][:8]]
        dev = meta["metrics"]["dev"]
        print(
            f"{name}: best epoch {meta['best_epoch']}, dev value {dev['value']:.3f} (oracle {dev['oracle']:.3f}); "
            f"by epoch {history} ({time.perf_counter() - start:.1f} s)"
        )
    return 0


def _ship(examples: list, splits: list, configs: dict) -> int:
    """What learn would ship under each ``{name: train settings}`` (module doc)."""
    from causalcache_lab.learn.config import LEARN_FINE_TUNE_LOSS, LEARN_FINE_TUNE_LR
    from causalcache_lab.selector.train import TrainConfig, train_selector

    for name, extra in configs.items():
        start = time.perf_counter()
        settings = {"init_from": "bundled", "splits": splits, "loss": LEARN_FINE_TUNE_LOSS, **extra}
        settings.setdefault("lr", LEARN_FINE_TUNE_LR[settings["loss"]])
        meta = train_selector(examples, TrainConfig(**settings), export_onnx=False).metadata
        gate = (meta.get("init_from") or {}).get("gate") or {}
        verdict = "the bundle" if meta["best_epoch"] == 0 else f"epoch {meta['best_epoch']}"
        ci = [round(c, 3) for c in gate.get("ci", [])]
        key = "budgeted_value" if meta.get("cross_fit") else "dev"  # cross-fitted: out-of-fold budgeted value
        history = [round(h[key] if key != "dev" else h["dev"]["value"], 3) for h in meta["history"][:16]]
        print(f"{name}: ships {verdict}; gate interval {ci or '-'}; {key} value by epoch {history} "
              f"({time.perf_counter() - start:.1f} s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
