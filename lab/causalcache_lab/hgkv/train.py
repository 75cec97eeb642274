"""DiD training of an HGKV (or ungated control) adapter on replacement groups, with gate-based selection.

Each step draws ``batch_size`` training groups of one budget ``B`` (budgets cycle, so every step's loss
is a single stratum and the run is stratified by ``B``), scores the three arms with the adapter active
(gradients on) and subtracts the frozen scores (computed once: the base is frozen), then minimises
:func:`~.did.did_loss`. Every ``eval_every`` steps the dev groups are scored; a checkpoint is eligible
only if it passes :func:`~.did.passes_gates` at every dev budget, and among eligible checkpoints the one
with the largest mean DiD select (averaged over budgets) is kept. Test groups are never touched.
"""

from __future__ import annotations

import copy
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from causalcache_lab.hgkv.did import DiDHyper, DiDStats, did_loss, did_stats, passes_gates
from causalcache_lab.hgkv.groups import ARMS, ReplacementGroup
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_memory.render.prompt import RenderOptions
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter
    from causalcache_memory.runtime.qwen_encoding import EncodedPrompt
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy
    from causalcache_memory.summarize import Summarizer

__all__ = ["GroupScorer", "TrainConfig", "TrainResult", "evaluate", "train_did"]


class GroupScorer:
    """Scores the three arms of replacement groups with a :class:`TransformersPolicy`.

    Encodings are cached per ``(group, arm)``: the prompt of an arm never changes during training.
    """

    def __init__(
        self,
        policy: TransformersPolicy,
        trajectories: Mapping[str, Trajectory],
        archive: Any,
        *,
        options: RenderOptions | None = None,
        summarizer: Summarizer | None = None,
    ) -> None:
        self.policy = policy
        self.trajectories = trajectories
        self.archive = archive
        self.options = options
        self.summarizer = summarizer
        self._cache: dict[tuple[ReplacementGroup, str], tuple[EncodedPrompt, list[int]]] = {}

    def prompt(self, group: ReplacementGroup, arm: str) -> Any:
        """The bound prompt of ``arm`` (same trace, current screen and target in every arm)."""
        from causalcache_memory.render.prompt import render_prompt

        traj = self.trajectories.get(group.trajectory_id)
        if traj is None:
            raise ConfigError(
                f"group t={group.t} B={group.budget} names trajectory {group.trajectory_id!r}, which is not "
                "in the trajectories file; pass the file the groups were mined from"
            )
        trace = traj.trace_at(group.t, summarizer=self.summarizer)
        return render_prompt(trace, group.allocation(arm), options=self.options).bind(self.archive)

    def encoded(self, group: ReplacementGroup, arm: str) -> tuple[EncodedPrompt, list[int]]:
        key = (group, arm)
        if key not in self._cache:
            self._cache[key] = (
                self.policy.encode(self.prompt(group, arm)),
                self.policy.target_ids(group.target),
            )
        return self._cache[key]

    def scores(self, groups: Sequence[ReplacementGroup], *, grad: bool = False) -> torch.Tensor:
        """``(groups, 3)`` mean target log-likelihoods in arm order ``recent, relevant, wrong``."""
        from causalcache_memory.runtime.qwen_encoding import collate

        items = [self.encoded(g, arm) for g in groups for arm in ARMS]
        batch = collate([p for p, _ in items], [t for _, t in items], pad_token_id=self.policy.pad_token_id)
        logprobs = self.policy.target_logprobs(batch, grad=grad)
        return torch.stack([lp.mean() for lp in logprobs]).reshape(len(groups), len(ARMS))

    def scores_chunked(self, groups: Sequence[ReplacementGroup], chunk: int = 8) -> np.ndarray:
        out = [
            self.scores(groups[i : i + chunk]).detach().cpu().numpy() for i in range(0, len(groups), chunk)
        ]
        return np.concatenate(out) if out else np.zeros((0, len(ARMS)))


@dataclass(frozen=True)
class TrainConfig:
    """Training knobs (recipe fields). ``hyper`` holds the objective's constants."""

    steps: int = 200
    lr: float = 5e-3
    batch_size: int = 4
    eval_every: int = 25
    seed: int = 0
    bootstrap_reps: int = 1000
    hyper: DiDHyper = field(default_factory=DiDHyper)

    def __post_init__(self) -> None:
        errors = [
            f"{name}={getattr(self, name)} must be >= 1"
            for name in ("steps", "batch_size", "eval_every", "bootstrap_reps")
            if getattr(self, name) < 1
        ]
        if not self.lr > 0:
            errors.append(f"lr={self.lr} must be > 0")
        if errors:
            raise ConfigError("invalid training config: " + "; ".join(errors), errors)


@dataclass
class TrainResult:
    """What :func:`train_did` measured.

    Attributes:
        history: one record per evaluation (step, train loss, dev stats per B, gates passed).
        selected_step: step of the selected checkpoint (None if no checkpoint passed the gates).
        selected_dev: dev stats of the selected checkpoint.
        seconds_per_step: mean wall time of a training step.
    """

    history: list[dict[str, Any]]
    selected_step: int | None
    selected_dev: dict[int, DiDStats] | None
    seconds_per_step: float


def _score_on_off(scorer: GroupScorer, adapter: HGKVAdapter, groups: Sequence[ReplacementGroup]) -> tuple:
    with torch.no_grad():
        on = scorer.scores_chunked(groups)
        with adapter.disable_adapter():
            off = scorer.scores_chunked(groups)
    return on, off


def evaluate(
    scorer: GroupScorer,
    adapter: HGKVAdapter,
    groups: Sequence[ReplacementGroup],
    *,
    reps: int = 1000,
    seed: int = 0,
) -> dict[int, DiDStats]:
    """Per-``B`` DiD statistics of ``adapter`` on ``groups`` (adapter on vs. off, each arm anchored)."""
    on, off = _score_on_off(scorer, adapter, groups)
    return did_stats(on, off, [g.budget for g in groups], reps=reps, seed=seed)


def train_did(
    scorer: GroupScorer,
    adapter: HGKVAdapter,
    train: Sequence[ReplacementGroup],
    dev: Sequence[ReplacementGroup],
    config: TrainConfig = TrainConfig(),
    *,
    on_checkpoint: Callable[[int, dict[int, DiDStats]], None] | None = None,
) -> TrainResult:
    """Train ``adapter`` (attached to ``scorer.policy``) and leave the selected checkpoint loaded.

    ``on_checkpoint(step, dev_stats)`` is called whenever a new best gated checkpoint is selected (e.g.
    to save it). Without any passing checkpoint the final weights stay loaded and
    ``selected_step`` is None.
    """
    if not train or not dev:
        raise ConfigError(f"DiD training needs train and dev groups; got {len(train)} train, {len(dev)} dev")
    if scorer.policy.adapter is not adapter:
        raise ConfigError("scorer.policy.adapter must be the adapter being trained")
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    hyper = config.hyper
    with torch.no_grad(), adapter.disable_adapter():
        frozen = {g: row for g, row in zip(train, torch.as_tensor(scorer.scores_chunked(train)), strict=True)}
    by_budget: dict[int, list[ReplacementGroup]] = {}
    for g in train:
        by_budget.setdefault(g.budget, []).append(g)
    budgets = sorted(by_budget)
    optimizer = torch.optim.AdamW(adapter.parameters(), lr=config.lr, weight_decay=0.0)
    history: list[dict[str, Any]] = []
    best: tuple[float, int, dict[str, torch.Tensor], dict[int, DiDStats]] | None = None
    spent = 0.0
    losses: list[float] = []
    for step in range(1, config.steps + 1):
        pool = by_budget[budgets[(step - 1) % len(budgets)]]
        batch = rng.sample(pool, min(config.batch_size, len(pool)))
        start = time.perf_counter()
        on = scorer.scores(batch, grad=True)
        off = torch.stack([frozen[g] for g in batch]).to(on.device)
        inc = on - off
        loss = did_loss(
            inc[:, 1], inc[:, 0], inc[:, 2], [g.budget for g in batch], adapter.l2_penalty(), hyper
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        spent += time.perf_counter() - start
        losses.append(float(loss.detach()))
        if step % config.eval_every and step != config.steps:
            continue
        stats = evaluate(scorer, adapter, dev, reps=config.bootstrap_reps, seed=config.seed)
        ok = passes_gates(stats, hyper.eps)
        history.append(
            {
                "step": step,
                "train_loss": float(np.mean(losses[-config.eval_every :])),
                "dev": {b: s.to_dict() for b, s in stats.items()},
                "gates": ok,
            }
        )
        score = float(np.mean([s.did_select.mean for s in stats.values()]))
        if ok and (best is None or score > best[0]):
            best = (score, step, copy.deepcopy(adapter.state_dict()), stats)
            if on_checkpoint is not None:
                on_checkpoint(step, stats)
    if best is not None:
        adapter.load_state_dict(best[2])
    return TrainResult(
        history=history,
        selected_step=best[1] if best else None,
        selected_dev=best[3] if best else None,
        seconds_per_step=spent / config.steps,
    )
