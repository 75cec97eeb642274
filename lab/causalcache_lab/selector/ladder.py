"""The allocation ladder: allocation rules bracketed at matched budgets (paper, "Ablations and Analyses").

On held-out decision states, for each budget ``B`` and each rule, the chosen exact-B set ``S`` is
rendered and *fully re-scored* through ``policy.score``; the reported quantity is the mean
log-likelihood margin ``Q(S) - Q(Recent-B)`` with a 95% interval from an episode-clustered bootstrap
(trajectories are resampled with replacement; the margin is the ratio of resampled sums), plus the
realized ``k = |S \\ Recent-B|`` profile. Every rule is reported pooled and **per split** (the
trajectory's ``metadata["split"]``, e.g. ``memory_critical``/``control``) with the states helped
(margin > 0) and harmed (margin < 0), the fire rate (share of states with ``S != Recent-B``: a second
model call at deployment) and, for the learned rules, the share of states the OOD guard sent to Recent-B.

Rules: ``learned`` (the deployed learned selector, :class:`~causalcache_memory.selector.allocator.
SelectorAllocator`, whose :meth:`~causalcache_memory.selector.allocator.SelectorAllocator.decide` makes
every learned rule's choice: ``min_gain`` and the OOD guard of the config),
``learned_paper`` (the same scorer with the paper's rule: ``min_gain = 0``, no guard), ``random`` (Random
exact-B), ``rgb`` (RGB similarity), ``first`` (First-B) and ``evenly_spaced`` (positional baselines),
``inverted`` (negated learned score, paper's rule: a specificity control of the scorer's ordering),
``no_recency`` (a scorer retrained without the recency-membership features, deployed settings),
``oracle`` (the same beam driven by true policy scores: headroom).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from causalcache_lab.selector.label_reference import target_text
from causalcache_lab.selector.labels import LabelConfig, _SetScorer, decision_states, policy_of
from causalcache_memory.allocation.base import AllocationContext, Allocator, make_allocation, recent_b
from causalcache_memory.allocation.simple import RandomAllocator
from causalcache_memory.errors import CausalCacheError
from causalcache_memory.render.prompt import render_prompt
from causalcache_memory.selector.allocator import SelectorAllocator
from causalcache_memory.selector.beam import beam_search
from causalcache_memory.selector.features import FeatureExtractor, ScreenTextSource, ThumbnailSource
from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_memory.actions.model import Action
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Policy
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

__all__ = ["LadderConfig", "bootstrap_ci", "format_table", "run_ladder"]

RULES = (
    "learned",
    "learned_paper",
    "random",
    "rgb",
    "first",
    "evenly_spaced",
    "inverted",
    "no_recency",
    "oracle",
)
_LEARNED = ("learned", "learned_paper", "inverted", "no_recency")
#: |margin| below this counts as neither helped nor harmed
TIE = 1e-6


class LadderConfig(BaseModel):
    """Ladder settings.

    Attributes:
        budgets: budgets to evaluate.
        rules: rules to run (those whose inputs are missing are reported as skipped).
        witness: reference action for the learned rules: ``proposal`` (the policy's greedy action on the
            Recent-B prompt, as deployed), ``gold`` (the target, an oracle) or ``none``.
        beam_width: beam of the learned rules; ``oracle_beam_width`` for the true-score oracle.
        min_gain: swap threshold of ``learned``/``no_recency``: ``auto`` = the model's calibrated one.
        second_pass_share: with ``min_gain: auto``, the pass-2 share the threshold is chosen for.
        ood_guard: whether ``learned``/``no_recency`` fall back to Recent-B on out-of-distribution states.
        max_states_per_trajectory, stride, min_distant: which decision states (as in labelling).
        bootstrap: resamples; ``seed`` seeds them and the Random rule.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    budgets: tuple[int, ...] = (2, 4)
    rules: tuple[str, ...] = RULES
    witness: str = "proposal"
    beam_width: int = Field(4, ge=1)
    min_gain: float | str = "auto"
    second_pass_share: float = Field(0.15, ge=0.0, le=1.0)
    ood_guard: bool = True
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


@dataclass
class _Ladder:
    """Everything the rules share across states (built once by :func:`run_ladder`)."""

    policy: Policy
    archive: ScreenshotArchive
    cfg: LadderConfig
    extractor: FeatureExtractor
    learned: dict[str, SelectorAllocator] = field(default_factory=dict)
    allocators: dict[str, Allocator] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)
    # rows[rule][B] -> list of (trajectory, split, margin, k, ood)
    rows: dict[str, dict[int, list[tuple[str, str, float, int, bool]]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(list))
    )


@dataclass
class _State:
    """One decision state of the plan, with what the learned rules need (computed once)."""

    traj: Trajectory
    t: int
    budget: int
    trace: Any
    score: _SetScorer
    witness: Action | None = None
    events: np.ndarray | None = None


def run_ladder(
    policy: Policy,
    archive: ScreenshotArchive,
    trajectories: Sequence[Trajectory],
    *,
    learned: OnnxScorer | None = None,
    no_recency: OnnxScorer | None = None,
    thumbnails: ThumbnailSource | None = None,
    screen_text: ScreenTextSource | None = None,
    config: LadderConfig | None = None,
    progress: bool = False,
) -> dict[str, Any]:
    """Evaluate every configured rule; returns the JSON-ready result (see module doc)."""
    cfg = config or LadderConfig()
    if learned is not None and not learned.image_features:
        thumbnails = None  # a model trained without thumbnail statistics sees them as 0, as deployed
    lad = _Ladder(policy, archive, cfg, FeatureExtractor(thumbnails, screen_text=screen_text))
    rules = _setup_rules(lad, [r for r in cfg.rules if r in RULES], learned, no_recency)
    label_cfg = LabelConfig(
        stride=cfg.stride,
        min_distant=cfg.min_distant,
        max_states_per_trajectory=cfg.max_states_per_trajectory,
    )
    plan = [(tr, t, b) for b in cfg.budgets for tr in trajectories for t in decision_states(tr, b, label_cfg)]
    from tqdm import tqdm

    for traj, t, budget in tqdm(plan, desc="allocation ladder", unit="state", disable=not progress):
        rules = _evaluate_state(lad, rules, traj, t, budget)
    return _summarize(lad)


def _setup_rules(
    lad: _Ladder, rules: list[str], learned: OnnxScorer | None, no_recency: OnnxScorer | None
) -> list[str]:
    """Build each rule's model or allocator; rules whose inputs are missing go to ``lad.skipped``."""
    cfg = lad.cfg
    deployed = {
        "min_gain": cfg.min_gain if cfg.min_gain == "auto" else float(cfg.min_gain),
        "second_pass_share": cfg.second_pass_share,
        # the dev threshold: the ladder's states come in label order, not as one deployment's decisions
        "share_window": None,
        # for the same reason the model's guard on every state, never refitted on them (the guard before try 2)
        **GUARD_BEFORE_TRY2,
    }
    beam = {"beam_width": cfg.beam_width}
    if learned is not None:  # the deployed allocator around the given scorer, in each rule's settings
        lad.learned["learned"] = SelectorAllocator(learned, **beam, **deployed, ood_guard=cfg.ood_guard)
        lad.learned["learned_paper"] = SelectorAllocator(learned, **beam, min_gain=0.0, ood_guard=False)
        lad.learned["inverted"] = SelectorAllocator(
            learned, **beam, min_gain=0.0, ood_guard=False, inverted=True
        )
    if no_recency is not None:
        lad.learned["no_recency"] = SelectorAllocator(no_recency, **beam, **deployed, ood_guard=cfg.ood_guard)
    for rule in rules:
        if rule in _LEARNED and rule not in lad.learned:
            lad.skipped[rule] = (
                "no model retrained without recency features given"
                if rule == "no_recency"
                else "no learned model given"
            )
        elif rule == "rgb" and not hasattr(lad.archive, "open_image"):
            lad.skipped[rule] = "the archive cannot decode pixels (no open_image)"
        elif rule not in _LEARNED and rule != "oracle":
            try:
                lad.allocators[rule] = _baseline(rule, cfg.seed)
            except ImportError as exc:
                lad.skipped[rule] = f"not available in this build ({exc})"
    return [r for r in rules if r not in lad.skipped]


def _baseline(rule: str, seed: int) -> Allocator:
    if rule == "random":
        return RandomAllocator(seed=seed)
    if rule == "rgb":
        from causalcache_memory.allocation.rgb import RGBSimilarityAllocator

        return RGBSimilarityAllocator()
    from causalcache_memory.allocation import positional  # First-B / evenly spaced (world issue)

    return positional.FirstBAllocator() if rule == "first" else positional.EvenlySpacedAllocator()


def _evaluate_state(lad: _Ladder, rules: list[str], traj: Trajectory, t: int, budget: int) -> list[str]:
    """Choose a set per rule for one state, re-score them all in one call and record the margins."""
    cfg = lad.cfg
    trace = traj.trace_at(t)
    score = _SetScorer(
        policy_of(lad.policy, traj),
        lad.archive,
        trace,
        budget,
        target_text(traj, t, "response"),
        cfg.batch_size,
    )
    state = _State(traj, t, budget, trace, score)
    if set(_LEARNED) & set(rules):
        state.witness = _witness(
            cfg.witness, policy_of(lad.policy, traj), lad.archive, traj, t, trace, budget
        )
        state.events = lad.extractor(trace, budget, state.witness)
    chosen: dict[str, tuple[tuple[int, ...], bool]] = {}
    for rule in rules:
        try:
            chosen[rule] = _choose(rule, lad, state)
        except CausalCacheError as exc:
            lad.skipped[rule] = f"{type(exc).__name__}: {exc}"
    rules = [r for r in rules if r not in lad.skipped]
    recent = recent_b(t, budget)
    q = score([recent] + [chosen[r][0] for r in rules])
    split = str(traj.metadata.get("split", "") or "all")
    for rule, value in zip(rules, q[1:], strict=True):
        selected, ood = chosen[rule]
        k = len(set(selected) - set(recent))
        lad.rows[rule][budget].append((traj.trajectory_id, split, value - q[0], k, ood))
    return rules


def _choose(rule: str, lad: _Ladder, state: _State) -> tuple[tuple[int, ...], bool]:
    """``(chosen set, fell back because out of distribution)`` of ``rule`` at ``state``."""
    t, budget = state.t, state.budget
    if rule in lad.learned:  # the deployed decision rule on the state's features
        allocation = lad.learned[rule].decide(state.events, t=t, budget=budget, witness=state.witness)
        return allocation.selected, allocation.info.get("fallback") == "ood"
    if rule == "oracle":
        scorer = _oracle_scorer(state.score, t - 1)
        return beam_search(scorer, t=t, budget=budget, beam_width=lad.cfg.oracle_beam_width).selected, False
    ctx = AllocationContext(state.trace, budget, archive=lad.archive, witness=state.witness)
    return lad.allocators[rule].allocate(ctx).selected, False


def _cell(rows: Sequence[tuple[str, str, float, int, bool]], cfg: LadderConfig, seed: int) -> dict[str, Any]:
    """Margin with its clustered interval, helped/harmed/fire/OOD counts and the k profile of ``rows``."""
    per_traj: dict[str, list[float]] = defaultdict(list)
    for tid, _, margin, _, _ in rows:
        per_traj[tid].append(margin)
    ids = sorted(per_traj)
    sums = np.array([sum(per_traj[i]) for i in ids])
    counts = np.array([len(per_traj[i]) for i in ids], dtype=float)
    mean, ci = bootstrap_ci(sums, counts, n=cfg.bootstrap, seed=seed)
    ks = Counter(r[3] for r in rows)
    n = len(rows)
    return {
        "margin": mean,
        "ci95": list(ci),
        "n_states": n,
        "n_trajectories": len(ids),
        "helped": sum(r[2] > TIE for r in rows),
        "harmed": sum(r[2] < -TIE for r in rows),
        "fire_rate": sum(r[3] > 0 for r in rows) / n,
        "ood_rate": sum(r[4] for r in rows) / n,
        "k_profile": {str(k): v / n for k, v in sorted(ks.items())},
        "mean_k": sum(k * v for k, v in ks.items()) / n,
    }


def _summarize(lad: _Ladder) -> dict[str, Any]:
    cfg = lad.cfg
    results: dict[str, dict[str, Any]] = {}
    for rule in RULES:
        if rule not in lad.rows or rule in lad.skipped:
            continue
        results[rule] = {}
        for budget in cfg.budgets:
            rows = lad.rows[rule].get(budget, [])
            if not rows:
                continue
            cell = _cell(rows, cfg, cfg.seed + budget)
            splits = sorted({r[1] for r in rows})
            cell["splits"] = {
                s: _cell([r for r in rows if r[1] == s], cfg, cfg.seed + budget) for s in splits
            }
            results[rule][str(budget)] = cell
    settings = {r: {"min_gain": a.min_gain, "ood_guard": a.ood_guard} for r, a in lad.learned.items()}
    return {
        "results": results,
        "skipped": lad.skipped,
        "config": cfg.model_dump(),
        "learned_settings": settings,
        "labeller": getattr(lad.policy, "name", type(lad.policy).__name__),
    }


def format_table(report: Mapping[str, Any]) -> str:
    """Plain-text ladder: margin [ci95], mean k and fire rate per rule and budget, then one line per split
    with states helped/harmed and the OOD fallback rate."""
    budgets = report["config"]["budgets"]
    lines = ["rule          " + "".join(f"{'B=' + str(b):>50}" for b in budgets)]
    for rule, per_b in report["results"].items():
        splits = sorted({s for b in budgets for s in per_b.get(str(b), {}).get("splits", {})})
        for split in ["", *splits]:
            cells = []
            for b in budgets:
                r = per_b.get(str(b))
                r = r if not split or r is None else r.get("splits", {}).get(split)
                cells.append(_format_cell(r, detail=bool(split)))
            label = f"{rule:<14}" if not split else f"  {split[:12]:<12}"
            lines.append(label + "".join(f" {c:>49}" for c in cells))
    for rule, why in report.get("skipped", {}).items():
        lines.append(f"(skipped {rule}: {why})")
    return "\n".join(lines)


def _format_cell(r: Mapping[str, Any] | None, *, detail: bool) -> str:
    if not r:
        return "-"
    text = f"{r['margin']:+.4f} [{r['ci95'][0]:+.4f}, {r['ci95'][1]:+.4f}]"
    if not detail:
        return f"{text} k={r['mean_k']:.2f} fire={r['fire_rate']:.2f}"
    ood = f" ood={r['ood_rate']:.2f}" if r.get("ood_rate") else ""
    return f"{text} +{r['helped']}/-{r['harmed']} fire={r['fire_rate']:.2f}{ood}"


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
