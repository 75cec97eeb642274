"""The chooser ladder: allocation rules bracketed at matched budgets (paper, "Ablations and Analyses").

On held-out decision states, for each budget ``B`` and each rule, the chosen exact-B set ``S`` is
rendered and *fully re-scored* through ``policy.score``; the reported quantity is the mean
log-likelihood margin ``Q(S) - Q(Recent-B)`` with a 95% interval from an episode-clustered bootstrap
(trajectories are resampled with replacement; the margin is the ratio of resampled sums), plus the
realized ``k = |S \\ Recent-B|`` profile.

Rules: ``learned`` (set scorer + beam), ``random`` (Random exact-B), ``rgb`` (RGB similarity),
``inverted`` (negated learned score), ``no_recency`` (a scorer retrained without the recency-membership
features), ``oracle`` (the same beam driven by true policy scores: headroom).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from causalcache_memory.allocation.base import AllocationContext, make_allocation, recent_b
from causalcache_memory.allocation.simple import RandomAllocator
from causalcache_memory.errors import CausalCacheError
from causalcache_memory.lab.selector.labels import LabelConfig, _SetScorer, _target_text, decision_states
from causalcache_memory.render.prompt import render_prompt
from causalcache_memory.selector.beam import beam_search
from causalcache_memory.selector.features import FeatureExtractor, ThumbnailSource, context_features

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.lab.data.trajectory import Trajectory
    from causalcache_memory.policy import Policy
    from causalcache_memory.selector.onnx_scorer import OnnxSelector

__all__ = ["LadderConfig", "bootstrap_ci", "format_table", "run_ladder"]

RULES = ("learned", "random", "rgb", "inverted", "no_recency", "oracle")


class LadderConfig(BaseModel):
    """Ladder settings.

    Attributes:
        budgets: budgets to evaluate.
        rules: rules to run (those whose inputs are missing are reported as skipped).
        witness: reference action for the learned rules: ``proposal`` (the policy's greedy action on the
            Recent-B prompt, as deployed), ``gold`` (the target, an oracle) or ``none``.
        beam_width: beam of the learned rules; ``oracle_beam_width`` for the true-score oracle.
        max_states_per_trajectory, stride, min_distant: which decision states (as in labelling).
        bootstrap: resamples; ``seed`` seeds them and the Random rule.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    budgets: tuple[int, ...] = (2, 4)
    rules: tuple[str, ...] = RULES
    witness: str = "proposal"
    beam_width: int = Field(4, ge=1)
    oracle_beam_width: int = Field(2, ge=1)
    max_states_per_trajectory: int | None = 6
    stride: int = Field(1, ge=1)
    min_distant: int = Field(1, ge=1)
    batch_size: int = Field(32, ge=1)
    bootstrap: int = Field(2000, ge=10)
    seed: int = 0


def bootstrap_ci(
    sums: np.ndarray, counts: np.ndarray, *, n: int, seed: int
) -> tuple[float, tuple[float, float]]:
    """Ratio-of-sums mean and episode-clustered 95% percentile interval (clusters = rows)."""
    mean = float(sums.sum() / max(counts.sum(), 1))
    if len(sums) < 2:
        return mean, (mean, mean)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(sums), size=(n, len(sums)))
    boot = sums[idx].sum(1) / np.maximum(counts[idx].sum(1), 1)
    return mean, (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))


def _oracle_scorer(score: _SetScorer, n_events: int) -> Callable[[Sequence[tuple[int, ...]]], np.ndarray]:
    def scorer(conds: Sequence[tuple[int, ...]]) -> np.ndarray:
        out = np.zeros((len(conds), n_events))
        for k, cond in enumerate(conds):
            inside = set(cond)
            cands = [j for j in range(1, n_events + 1) if j not in inside]
            out[k, [j - 1 for j in cands]] = score([inside | {j} for j in cands])
        return out

    return scorer


def _witness(
    kind: str, policy: Policy, archive: ScreenshotArchive, traj: Trajectory, t: int, trace, budget: int
) -> Action | None:  # type: ignore[no-untyped-def]
    if kind == "gold":
        return traj.steps[t - 1].action
    if kind == "none":
        return None
    prompt = render_prompt(
        trace, make_allocation(recent_b(t, budget), t=t, budget=budget, allocator="recent")
    )
    return policy.generate(prompt.bind(archive)).action


def run_ladder(
    policy: Policy,
    archive: ScreenshotArchive,
    trajectories: Sequence[Trajectory],
    *,
    learned: OnnxSelector | None = None,
    no_recency: OnnxSelector | None = None,
    thumbnails: ThumbnailSource | None = None,
    config: LadderConfig | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Evaluate every configured rule; returns the JSON-ready result (see module doc)."""
    cfg = config or LadderConfig()
    extractor = FeatureExtractor(thumbnails)
    label_cfg = LabelConfig(
        stride=cfg.stride,
        min_distant=cfg.min_distant,
        max_states_per_trajectory=cfg.max_states_per_trajectory,
    )
    skipped: dict[str, str] = {}
    rules = [r for r in cfg.rules if r in RULES]
    if learned is None:
        for r in ("learned", "inverted"):
            if r in rules:
                skipped[r] = "no learned model given"
        rules = [r for r in rules if r not in ("learned", "inverted")]
    if no_recency is None and "no_recency" in rules:
        skipped["no_recency"] = "no model retrained without recency features given"
        rules.remove("no_recency")
    rgb = None
    if "rgb" in rules and not hasattr(archive, "open_image"):
        skipped["rgb"] = "the archive cannot decode pixels (no open_image)"
        rules.remove("rgb")
    if "rgb" in rules:
        from causalcache_memory.allocation.rgb import RGBSimilarityAllocator

        rgb = RGBSimilarityAllocator()
    random_rule = RandomAllocator(seed=cfg.seed)
    # margins[rule][B][trajectory] -> list of Q(S) - Q(Recent-B); ks[rule][B] -> Counter of k
    margins: dict[str, dict[int, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    ks: dict[str, dict[int, Counter]] = defaultdict(lambda: defaultdict(Counter))
    plan = [(tr, t, b) for b in cfg.budgets for tr in trajectories for t in decision_states(tr, b, label_cfg)]
    from tqdm import tqdm

    for traj, t, budget in tqdm(plan, desc="chooser ladder", unit="state", disable=not progress):
        trace = traj.trace_at(t)
        score = _SetScorer(policy, archive, trace, budget, _target_text(traj, t, "response"), cfg.batch_size)
        recent = recent_b(t, budget)
        chosen: dict[str, tuple[int, ...]] = {}
        witness, events, ctx_row = None, None, None
        if {"learned", "inverted", "no_recency"} & set(rules):
            witness = _witness(cfg.witness, policy, archive, traj, t, trace, budget)
            events = extractor(trace, budget, witness)
            ctx_row = context_features(t, budget, witness)
        for rule in rules:
            try:
                chosen[rule] = _choose(
                    rule,
                    learned,
                    no_recency,
                    rgb,
                    random_rule,
                    cfg,
                    trace,
                    archive,
                    budget,
                    t,
                    witness,
                    events,
                    ctx_row,
                    score,
                )
            except CausalCacheError as exc:
                skipped[rule] = f"{type(exc).__name__}: {exc}"
        rules = [r for r in rules if r not in skipped]
        q = score([recent] + [chosen[r] for r in rules])
        for rule, value in zip(rules, q[1:], strict=True):
            margins[rule][budget][traj.trajectory_id].append(value - q[0])
            ks[rule][budget][len(set(chosen[rule]) - set(recent))] += 1
    return _summarize(margins, ks, skipped, cfg, policy)


def _choose(
    rule,
    learned,
    no_recency,
    rgb,
    random_rule,
    cfg,
    trace,
    archive,
    budget,
    t,
    witness,
    events,
    ctx_row,
    score,
) -> tuple[int, ...]:  # type: ignore[no-untyped-def]
    if rule in ("learned", "inverted", "no_recency"):
        model = no_recency if rule == "no_recency" else learned
        scorer = model.scorer(events, ctx_row, sign=-1.0 if rule == "inverted" else 1.0)
        return beam_search(scorer, t=t, budget=budget, beam_width=cfg.beam_width).selected
    if rule == "oracle":
        return beam_search(
            _oracle_scorer(score, t - 1), t=t, budget=budget, beam_width=cfg.oracle_beam_width
        ).selected
    ctx = AllocationContext(trace, budget, archive=archive, witness=witness)
    return (rgb if rule == "rgb" else random_rule).allocate(ctx).selected


def _summarize(margins, ks, skipped, cfg: LadderConfig, policy) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    results: dict[str, dict[str, Any]] = {}
    for rule in RULES:
        if rule not in margins or rule in skipped:
            continue
        results[rule] = {}
        for budget in cfg.budgets:
            per_traj: Mapping[str, list[float]] = margins[rule].get(budget, {})
            if not per_traj:
                continue
            ids = sorted(per_traj)
            sums = np.array([sum(per_traj[i]) for i in ids])
            counts = np.array([len(per_traj[i]) for i in ids], dtype=float)
            mean, ci = bootstrap_ci(sums, counts, n=cfg.bootstrap, seed=cfg.seed + budget)
            total = sum(ks[rule][budget].values())
            results[rule][str(budget)] = {
                "margin": mean,
                "ci95": list(ci),
                "n_states": int(counts.sum()),
                "n_trajectories": len(ids),
                "k_profile": {str(k): v / total for k, v in sorted(ks[rule][budget].items())},
                "mean_k": sum(k * v for k, v in ks[rule][budget].items()) / total,
            }
    return {
        "results": results,
        "skipped": skipped,
        "config": cfg.model_dump(),
        "labeller": getattr(policy, "name", type(policy).__name__),
    }


def format_table(report: Mapping[str, Any]) -> str:
    """Plain-text ladder table: margin [ci95] and mean k per rule and budget."""
    budgets = report["config"]["budgets"]
    lines = ["rule          " + "".join(f"{'B=' + str(b):>34}" for b in budgets)]
    for rule, per_b in report["results"].items():
        cells = []
        for b in budgets:
            r = per_b.get(str(b))
            cells.append(
                f"{r['margin']:+.4f} [{r['ci95'][0]:+.4f}, {r['ci95'][1]:+.4f}] k={r['mean_k']:.2f}"
                if r
                else "-"
            )
        lines.append(f"{rule:<14}" + "".join(f"{c:>34}" for c in cells))
    for rule, why in report.get("skipped", {}).items():
        lines.append(f"(skipped {rule}: {why})")
    return "\n".join(lines)


def held_out(trajectories: Sequence[Trajectory], model_dir: str | Path | None, split: str = "test") -> list:
    """Trajectories of ``split`` according to the model directory's ``metadata.json``.

    ``split="all"``, no model directory or no metadata: every trajectory.
    """
    if model_dir is None or split == "all":
        return list(trajectories)
    meta_path = Path(model_dir) / "metadata.json"
    if not meta_path.is_file():
        return list(trajectories)
    import json

    keep = set(json.loads(meta_path.read_text())["splits"].get(split, []))
    return [t for t in trajectories if t.trajectory_id in keep]
