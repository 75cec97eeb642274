"""Which states a cross-fitted fine-tune fires on, out of fold, against its base (RESULTS.md 9i).

The deployment runs pass 2 on its highest predicted gains across decisions: per memory budget ``B``, the
top 15% of states by their best first swap's predicted gain ``d`` (never ``d <= 0``). For a ``learn`` run's
labels this tool cross-fits the fine-tune for ``--epochs`` (5 folds, learn's settings from the run's
``metadata.json``), and compares, out of fold, the states the base (epoch 0) fires on with those the
fine-tune fires on:

* **dropped** (base only), **added** (fine-tune only) and **both**, each with the summed label of the
  fired swap and the event families of the swap (``cand`` swapped in for ``out``);
* the budgeted value per pool state of the base, the fine-tune, and a **hybrid** in which the base decides
  which states fire and the fine-tune which swap (an offline what-if; nothing deploys it).

    python lab/tools/learn_fire_probe.py runs/s8/fe4-devage-01-7002 runs/s7/g0-devage-01-7002/record

``RUN`` holds ``learn-teacher_forced`` (trajectories, labels, model); ``RECORD`` the recording whose
archive gives the screens' text (the world's OCR, as ``lab/tools/learn_offline_probe.py``).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FAMILIES = ("click", "type", "key", "app", "nav")


def _examples(run: Path, record: Path) -> tuple[list[Any], dict[str, Any]]:
    from causalcache_lab.data.trajectory import load_trajectories
    from causalcache_lab.learn.mix import mix_labels
    from causalcache_lab.selector.train import build_examples
    from causalcache_lab.selector.world_text import WorldScreenText
    from causalcache_memory.archive.local import LocalArchive
    from causalcache_memory.selector.features import FeatureExtractor

    learn = run / "learn-teacher_forced"
    trajs = {t.trajectory_id: t for t in load_trajectories(learn / "trajectories/trajectories.jsonl")}
    labels = learn / "labels-teacher_forced/labels.jsonl"
    _, records = mix_labels({"teacher_forced": labels}, {"teacher_forced": 1.0})
    text = WorldScreenText(LocalArchive(next(record.glob("archive-*"))))
    examples = build_examples(
        records, trajs, extractor=FeatureExtractor(screen_text=text), witness="gold", seed=0
    )
    return examples, json.loads((learn / "model/model/metadata.json").read_text())


def _top(d: np.ndarray, ex: Any) -> tuple[float, float, int] | None:
    """``(predicted gain, label, entry)`` of the state's best first swap out of Recent-B, None without one."""
    keep = ex.from_recent[ex.group] & (ex.cand != ex.out) if len(ex.from_recent) else np.zeros(0, bool)
    if not keep.any():
        return None
    idx = np.flatnonzero(keep)
    best = idx[int(np.argmax(d[idx]))]
    return float(d[best]), float(ex.y[best]), int(best)


def _fired(rows: list[tuple[Any, Any, int]], budget: float) -> set[int]:
    """Row numbers of the fired states: per ``B``, the top ``floor(budget * n)`` by gain, gain > 0."""
    out: set[int] = set()
    for b in {r[2] for r in rows}:
        sel = [(i, r) for i, r in enumerate(rows) if r[2] == b]
        m = int(budget * len(sel))
        ranked = sorted(sel, key=lambda ir: -ir[1][0][0])[:m]
        out.update(i for i, r in ranked if r[0][0] > 0.0)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("record", type=Path)
    parser.add_argument(
        "--epochs", type=int, default=4, help="the fixed fine-tuning length (learn's default 4)"
    )
    args = parser.parse_args(argv)

    from causalcache_lab.selector import cross_fit as cross_module
    from causalcache_lab.selector.train import TrainConfig, train_selector
    from causalcache_memory.selector.schema import feature_index
    from causalcache_memory.selector.threshold import DEFAULT_SECOND_PASS_SHARE as BUDGET

    examples, meta = _examples(args.run, args.record)
    scored: list[tuple[list[np.ndarray], list[Any]]] = []  # per fold per epoch, in cross_fit's order
    original = cross_module.budgeted_values

    def spy(diffs, held, budget=BUDGET):  # type: ignore[no-untyped-def]
        scored.append((list(diffs), list(held)))
        return original(diffs, held, budget)

    cross_module.budgeted_values = spy
    settings = {**meta["train"], "cross_fit": 5, "cross_fit_epochs": args.epochs, "fine_tune_gate": None}
    result = train_selector(examples, TrainConfig(**settings), export_onnx=False).metadata
    folds = result["cross_fit"]["folds"]
    family_col = {f: feature_index(f"event_type_{f}") for f in FAMILIES}

    def family(ex: Any, row: int) -> str:
        return next((f for f, c in family_col.items() if ex.events[row, c] > 0.5), "other")

    groups: dict[str, list[tuple[float, str, str]]] = collections.defaultdict(list)
    value = {"base": 0.0, "fine-tune": 0.0, "hybrid": 0.0}
    states = 0
    for f in range(folds):
        (d0, held), (de, _) = scored[f], scored[args.epochs * folds + f]
        states += len(held)
        rows = [(_top(d0[i], ex), _top(de[i], ex), ex.budget, ex) for i, ex in enumerate(held)]
        rows = [r for r in rows if r[0] is not None]
        base = _fired([(r[0], None, r[2]) for r in rows], BUDGET)
        tuned = _fired([(r[1], None, r[2]) for r in rows], BUDGET)
        for name, fired, pick in (("base", base, 0), ("fine-tune", tuned, 1), ("hybrid", base, 1)):
            value[name] += sum(rows[i][pick][1] for i in fired)
        for name, keys, pick in (("dropped (base only)", base - tuned, 0), ("added (fine-tune only)", tuned - base, 1),
                                 ("both, the base's swap", base & tuned, 0), ("both, the fine-tune's swap", base & tuned, 1)):  # fmt: skip
            for i in keys:
                _, label, entry = rows[i][pick]
                ex = rows[i][3]
                groups[name].append((label, family(ex, int(ex.cand[entry])), family(ex, int(ex.out[entry]))))
    history = [round(h["budgeted_value"], 4) for h in result["history"]]
    print(f"{args.run}: {states} pool states; out-of-fold budgeted value by epoch {history}")
    print("budgeted value per state: " + ", ".join(f"{k} {v / states:.4f}" for k, v in value.items()))
    for name in (
        "dropped (base only)",
        "added (fine-tune only)",
        "both, the base's swap",
        "both, the fine-tune's swap",
    ):
        rows = groups[name]
        print(f"  {name}: {len(rows)} states, summed label {sum(r[0] for r in rows):+.2f}, "
              f"{sum(r[0] > 0.05 for r in rows)} with a gain, {sum(r[0] < -1 for r in rows)} below -1")  # fmt: skip
        by = collections.Counter((c, o) for _, c, o in rows)
        for (cand, out), n in by.most_common(5):
            total = sum(r[0] for r in rows if (r[1], r[2]) == (cand, out))
            print(f"      {cand:>5} in for {out:<5}: {n:4d} states, summed label {total:+.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
