"""Recipe-driven entry points: train an adapter arm, and the DiD evaluation table.

These compose the library (policy runtime, group mining, training); the CLI in
``causalcache_lab.cli.train_hgkv`` only parses arguments and prints.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causalcache_lab.hgkv.did import DiDHyper, DiDStats
from causalcache_lab.hgkv.groups import ReplacementGroup, load_groups, mine_groups, save_groups
from causalcache_lab.hgkv.recipe import HGKVRecipe
from causalcache_memory.errors import ConfigError

__all__ = ["DiDReport", "PreparedData", "evaluate_did", "format_did_table", "prepare", "train_from_recipe"]


@dataclass
class PreparedData:
    trajectories: dict[str, Any]
    archive: Any
    groups: list[ReplacementGroup]
    mining: str


def _model_dir(recipe: HGKVRecipe) -> Path:
    path = Path(recipe.model)
    if not (path / "config.json").is_file() and recipe.tiny_model is not None:
        from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

        spec = recipe.tiny_model
        build_tiny_qwen_vl(path, family=spec.family, num_layers=spec.num_layers, seed=spec.seed)
    return path


def prepare(recipe: HGKVRecipe) -> PreparedData:
    """Trajectories, archive and replacement groups (read from ``data.groups`` or mined and written)."""
    from causalcache_lab.data.trajectory import load_trajectories
    from causalcache_memory.archive.factory import open_archive

    archive = open_archive(recipe.archive)
    data = recipe.data
    equivalent = None
    if data.synthetic is not None:
        from causalcache_lab.hgkv.synthetic import colour_recall_trajectories, same_click

        trajs = colour_recall_trajectories(
            archive, data.synthetic.trajectories, seed=data.synthetic.seed, colours=data.synthetic.colours
        )
        equivalent = same_click
    else:
        trajs = [t for f in data.trajectories for t in load_trajectories(f)]
    by_id = {t.trajectory_id: t for t in trajs}
    if data.groups and Path(data.groups).is_file():
        groups = list(load_groups(data.groups))
        mining = f"{len(groups)} groups read from {data.groups}"
    else:
        tolerance = None
        if data.radius is not None:
            from dataclasses import replace

            from causalcache_lab.hgkv.groups import MINING_TOLERANCE

            tolerance = replace(MINING_TOLERANCE, desktop_radius=data.radius, mobile_radius=data.radius)
        groups, report = mine_groups(
            trajs,
            budgets=data.budgets,
            equivalent=equivalent,
            dev=data.dev_fraction,
            test=data.test_fraction,
            salt=data.split_salt,
            held_out_budgets=data.held_out_budgets,
            tolerance=tolerance,
        )
        mining = report.summary()
        if data.groups:
            Path(data.groups).parent.mkdir(parents=True, exist_ok=True)
            save_groups(data.groups, groups, by_id)
    groups = [g for g in groups if g.budget in data.budgets or g.budget in data.held_out_budgets]
    return PreparedData(by_id, archive, groups, mining)


def _scorer(recipe: HGKVRecipe, prepared: PreparedData, adapter: Any) -> Any:
    from causalcache_lab.hgkv.train import GroupScorer
    from causalcache_memory.render.prompt import RenderOptions
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    policy = TransformersPolicy.from_pretrained(
        _model_dir(recipe), device=recipe.device, dtype=recipe.dtype, adapter=adapter
    )
    options = (
        RenderOptions(system_prompt=recipe.render.system_prompt) if recipe.render.system_prompt else None
    )
    summarizer = None
    if recipe.render.short_summaries:
        from causalcache_lab.hgkv.synthetic import short_summary

        summarizer = short_summary
    return GroupScorer(
        policy, prepared.trajectories, prepared.archive, options=options, summarizer=summarizer
    )


def training_setup(recipe: HGKVRecipe, prepared: Any) -> tuple[list[Any], list[Any], Any, Any, Any]:
    """``(train groups, dev groups, adapter, scorer, TrainConfig)`` of a recipe, shared by the single-process
    and the torchrun entry points. Held-out budgets (B = 8 in the paper) never reach training or
    checkpoint selection; the adapter is injected into the scorer's model with the base frozen."""
    from causalcache_lab.hgkv.train import TrainConfig
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter, HGKVConfig

    train = [g for g in prepared.groups if g.split == "train" and not g.held_out]
    dev = [g for g in prepared.groups if g.split == "dev" and not g.held_out]
    adapter = HGKVAdapter(
        HGKVConfig(
            r=recipe.rank, alpha=recipe.alpha, num_layers=recipe.num_layers, gated=recipe.arm == "hgkv"
        )
    )
    scorer = _scorer(recipe, prepared, adapter)
    adapter.inject(scorer.policy.model, freeze_base=True)
    t = recipe.train
    config = TrainConfig(
        steps=t.steps,
        lr=t.lr,
        batch_size=t.batch_size,
        eval_every=t.eval_every,
        seed=t.seed,
        bootstrap_reps=t.bootstrap_reps,
        hyper=DiDHyper(t.margin, t.eps, t.lam_cap, t.lam),
    )
    return train, dev, adapter, scorer, config


def train_from_recipe(recipe: HGKVRecipe, *, log: Any = print) -> Any:
    """Train the recipe's arm; writes ``best/`` (gated selection), ``final/`` and ``train_log.json``."""
    from causalcache_lab.hgkv.train import train_did

    prepared = prepare(recipe)
    log(f"groups: {prepared.mining}")
    train, dev, adapter, scorer, config = training_setup(recipe, prepared)
    out = Path(recipe.output_dir)

    def keep(step: int, stats: Mapping[int, DiDStats]) -> None:
        adapter.save_pretrained(out / "best")
        log(f"step {step}: gates pass; saved {out / 'best'}")

    result = train_did(scorer, adapter, train, dev, config, on_checkpoint=keep)
    out.mkdir(parents=True, exist_ok=True)
    log_data = {
        "arm": recipe.arm,
        "selected_step": result.selected_step,
        "seconds_per_step": result.seconds_per_step,
        "history": result.history,
        "groups": {s: sum(g.split == s for g in prepared.groups) for s in ("train", "dev", "test")},
    }
    (out / "train_log.json").write_text(json.dumps(log_data, indent=2) + "\n", encoding="utf-8")
    if result.selected_step is not None:
        log(f"selected step {result.selected_step} (saved in {out / 'best'})")
    else:
        log("no checkpoint passed the dev gates; final weights saved to final/ only (not selected)")
        adapter.save_pretrained(out / "final")
    return result


@dataclass
class DiDReport:
    """Per adapter name, per ``B`` stats on one split."""

    split: str
    adapters: dict[str, dict[int, DiDStats]]

    def to_dict(self) -> dict[str, Any]:
        return {
            "split": self.split,
            "adapters": {n: {b: s.to_dict() for b, s in d.items()} for n, d in self.adapters.items()},
        }


def evaluate_did(
    recipe: HGKVRecipe,
    adapters: Mapping[str, str | Path],
    *,
    split: str = "dev",
    reps: int = 2000,
    seed: int = 0,
) -> DiDReport:
    """DiD statistics of each saved adapter (name -> directory) on ``split`` groups."""
    from causalcache_lab.hgkv.train import evaluate
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter

    if split not in ("train", "dev", "test"):
        raise ConfigError(f"split={split!r} must be train, dev or test")
    prepared = prepare(recipe)
    groups = [g for g in prepared.groups if g.split == split]
    if not groups:
        raise ConfigError(f"no {split} groups (mining: {prepared.mining})")
    out: dict[str, dict[int, DiDStats]] = {}
    for name, path in adapters.items():
        adapter = HGKVAdapter.load(path)
        scorer = _scorer(recipe, prepared, adapter)
        out[name] = evaluate(scorer, adapter, groups, reps=reps, seed=seed)
    return DiDReport(split, out)


def format_did_table(report: DiDReport, budgets: Sequence[int] | None = None) -> str:
    """The paper's DiD table per ``B``, plus the frozen policy's selectivity probe."""
    lines = [
        f"DiD evaluation on {report.split} groups (mean [95% bootstrap interval])",
        f"{'adapter':<10} {'B':>2} {'n':>4}  {'DiD select':<27} {'|A_r|':<27} {'wrong drift':<27}",
    ]
    frozen: dict[int, DiDStats] = {}
    for name, per_b in report.adapters.items():
        for b, s in sorted(per_b.items()):
            if budgets and b not in budgets:
                continue
            frozen.setdefault(b, s)
            lines.append(
                f"{name:<10} {b:>2} {s.groups:>4}  {s.did_select!s:<27} {s.abs_recent!s:<27} {s.wrong_drift!s:<27}"
            )
    lines.append("frozen policy selectivity probe: l_off(relevant) - l_off(recent)")
    for b, s in sorted(frozen.items()):
        lines.append(f"{'frozen':<10} {b:>2} {s.groups:>4}  {s.frozen_probe!s}")
    return "\n".join(lines)
