"""Cheap vs full selector labels on the world family: prompts per state and the ladder margin (issue 25).

``python -m causalcache_lab.selector.prompt_cap_probe --out DIR [--cap NAME=JSON ...]``

1. Expert demonstrations of ``--train-tasks`` tasks of the training worlds of one action vocabulary
   (``--vocab touch``: six worlds, ``keys``: the other six) and ``--dev-tasks`` tasks of the development
   worlds of that vocabulary (``dev-03``; ``dev-00..02``) for epoch choice and calibration, labelled by the simulated policy in full and under
   each prompt cap (``NAME=JSON``, a :class:`~causalcache_lab.selector.prompt_cap.PromptCap`);
   prompts per labelled state are counted per ``B``.
2. One selector trained per label set, same training config and seed.
3. The allocation ladder on ``--eval-tasks`` fresh tasks of the same development worlds (seed
   ``--eval-seed``; development worlds only, never held-out ones): margin over Recent-B of the deployed rule and of the paper's rule.

Prints one JSON line per label set and writes ``DIR/summary_seeds<S>.json`` (``ladder`` per training
seed ``--train-seeds``; rows of earlier runs with the same seeds are kept). Label files already in
``DIR`` are resumed, so more seeds reuse the labels. The simulated policy is shared by
every label set (its per-prompt cache makes the cheap runs fast; prompts are counted, not seconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causalcache_memory.errors import ConfigError

__all__ = ["main", "prompts_per_state"]

#: vocabulary -> (training worlds, development worlds): the simulated labeller speaks one vocabulary
WORLDS = {
    "touch": ("train-02,train-05,train-07,train-08,train-09,train-11", "dev-03"),
    "keys": ("train-00,train-01,train-03,train-04,train-06,train-10", "dev-00,dev-01,dev-02"),
}


def prompts_per_state(records: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Mean prompts scored per labelled state, per ``B`` and over all, and the full-labelling fallback share."""
    by_b: dict[int, list[int]] = defaultdict(list)
    for rec in records:
        if "label_budget" in rec:  # the field's name before "budget" came to mean B only
            raise ConfigError(
                f"label record {rec.get('key', '?')!r} has the field 'label_budget', since renamed "
                "'prompt_cap' (same content: prior, fallback, cap); rename the key in the labels file, "
                'e.g. sed -i \'s/"label_budget":/"prompt_cap":/\' FILE, or label again'
            )
        by_b[int(rec["budget"])].append(int(rec["prompts_scored"]))
    out = {f"B{b}": statistics.fmean(v) for b, v in sorted(by_b.items())}
    out["all"] = statistics.fmean(int(r["prompts_scored"]) for r in records)
    fb = [r for r in records if (r.get("prompt_cap") or {}).get("fallback")]
    out["fallback_share"] = len(fb) / len(records)
    return out


def _train(records, trajectories, model_dir: Path, epochs: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    from causalcache_lab.selector.train import TrainConfig, build_examples, train_selector

    cfg = TrainConfig(epochs=epochs, seed=seed, split_by="metadata")
    examples = build_examples(records, {t.trajectory_id: t for t in trajectories}, seed=0)
    train_selector(examples, cfg, output_dir=model_dir, image_features=False)


def _ladder(policy, eval_setup: dict[str, Any], model_dir: Path, budgets: Sequence[int]) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    from causalcache_lab.selector.ladder import LadderConfig, run_ladder
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    cfg = LadderConfig(
        budgets=tuple(budgets),
        rules=("learned", "learned_paper"),
        max_states_per_trajectory=6,
        bootstrap=1000,
        seed=0,
    )
    report = run_ladder(
        policy, eval_setup["archive"], eval_setup["trajectories"], learned=OnnxScorer(model_dir), config=cfg
    )
    out = {}
    for rule, per_b in report["results"].items():
        for b, cell in per_b.items():
            out[f"{rule}_B{b}"] = {k: cell[k] for k in ("margin", "ci95", "n_states", "fire_rate")}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from causalcache_lab.selector.labels import LabelConfig, read_labels, run_labelling
    from causalcache_lab.selector.prompt_cap import PromptCap
    from causalcache_lab.selector.recipe import world_setup

    ap = argparse.ArgumentParser(prog="prompt_cap_probe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--vocab", choices=sorted(WORLDS), default="touch")
    ap.add_argument("--train-tasks", type=int, default=120)
    ap.add_argument("--dev-tasks", type=int, default=40)
    ap.add_argument("--eval-tasks", type=int, default=40)
    ap.add_argument("--eval-seed", type=int, default=4242)
    ap.add_argument("--max-states", type=int, default=6, help="labelled states per trajectory and B")
    ap.add_argument("--epochs", type=int, default=25)
    ap.add_argument("--ladder-budgets", default="4")
    ap.add_argument("--train-seeds", default="0", help="training seeds; one selector and ladder per seed")
    ap.add_argument("--cap", action="append", default=[], help="NAME=JSON of a PromptCap")
    ap.add_argument("--no-full", action="store_true", help="skip the full-labelling baseline")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    train_worlds, dev_worlds = WORLDS[args.vocab]
    setup = world_setup(
        tasks=args.train_tasks,
        seed=0,
        archive=str(out / "archive"),
        worlds=train_worlds,
        dev_worlds=dev_worlds,
        dev_tasks=args.dev_tasks,
    )
    evals = world_setup(
        tasks=args.eval_tasks, seed=args.eval_seed, archive=str(out / "eval_archive"), worlds=dev_worlds
    )
    policy = setup["policy"]
    runs: list[tuple[str, PromptCap | None]] = [] if args.no_full else [("full", None)]
    for spec in args.cap:
        name, _, raw = spec.partition("=")
        runs.append((name, PromptCap(**json.loads(raw))))
    budgets = [int(b) for b in args.ladder_budgets.split(",")]
    summary_path = out / f"summary_seeds{args.train_seeds.replace(',', '-')}.json"
    summary: dict[str, Any] = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for name, prompt_cap in runs:
        cfg = LabelConfig(max_states_per_trajectory=args.max_states, prompt_cap=prompt_cap)
        path = out / f"labels_{name}.jsonl"
        start = time.perf_counter()
        run_labelling(policy, setup["archive"], setup["trajectories"], path, cfg, progress=False)
        label_s = time.perf_counter() - start
        _, records = read_labels(path)
        ladders = {}
        for seed in (int(x) for x in args.train_seeds.split(",")):
            model_dir = out / f"model_{name}" if seed == 0 else out / f"model_{name}_seed{seed}"
            _train(records, setup["trajectories"], model_dir, args.epochs, seed)
            ladders[str(seed)] = _ladder(policy, evals, model_dir, budgets)
        row = {
            "prompt_cap": None if prompt_cap is None else prompt_cap.model_dump(),
            "states": len(records),
            "mean_t": statistics.fmean(int(r["t"]) for r in records),
            "prompts_per_state": prompts_per_state(records),
            "label_seconds": round(label_s, 1),
            "ladder": ladders,
        }
        summary[name] = row
        print(json.dumps({"name": name, **row}), flush=True)
        (out / f"summary_seeds{args.train_seeds.replace(',', '-')}.json").write_text(
            json.dumps(summary, indent=1)
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
