"""One training batch's loss for the set scorer, as the recipe (``train:``) asks (PyTorch; imported on use).

``regression`` (the paper's recipe): Huber on ``d - y / s`` over every label entry plus pairwise ranks,

    L = mean_j Huber(d_j - y_j / s)  +  λ_rank · mean_{(a,b): y_a > y_b + ε} softplus(-(d_a - d_b) / τ)

``decision``: the per-state choice of the deployed first swap (:mod:`.decision_loss`, with its anchor,
rank and path terms) plus, when fine-tuning with ``decision_later_weight`` μ > 0, the base's judgement of
the second swap (:mod:`.later_anchor`). ``d_j = Δ̂(j | C) - Δ̂(r | C)`` is the model's predicted gain of
each entry (:func:`entry_diffs`), in units of the target scale ``s``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from causalcache_lab.selector.decision_loss import decision_loss
from causalcache_lab.selector.later_anchor import later_anchor_loss
from causalcache_lab.selector.train_config import TrainConfig
from causalcache_memory._optional import require

torch = require("torch", purpose="training the learned selector")

__all__ = ["batch_loss", "entry_diffs", "needs_base"]


def entry_diffs(model: Any, tx: Mapping[str, Any]) -> Any:
    """``(L,)`` predicted gain ``d`` of every label entry of the collated batch ``tx``."""
    scores = model(tx["events"], tx["sets"], tx["mask"], tx["context"])
    return scores[tx["group"], tx["cand"]] - scores[tx["group"], tx["out"]]


def needs_base(cfg: TrainConfig) -> bool:
    """Whether the loss reads a frozen copy of the base (a fine-tune's anchor or later-swap term)."""
    return cfg.decision_anchor_weight > 0 or cfg.decision_later_weight > 0


def batch_loss(model: Any, tx: Mapping[str, Any], scale: float, cfg: TrainConfig, base: Any = None) -> Any:
    """The batch's loss (module doc); ``base``: the frozen base the fine-tune terms read (None: off)."""
    d = entry_diffs(model, tx)
    if cfg.loss == "decision":
        with torch.no_grad():  # the frozen base, built only when a term needs it
            d_base = entry_diffs(base, tx) if base is not None else None
        loss = decision_loss(
            d,
            tx,
            scale,
            tau=cfg.decision_temperature,
            min_gain=cfg.decision_min_gain,
            keep_weight=cfg.decision_keep_weight,
            state_rank_weight=cfg.decision_state_rank_weight,
            anchor_weight=cfg.decision_anchor_weight,
            d_base=d_base,
            path_weight=cfg.decision_path_weight,
        )
        if cfg.decision_later_weight > 0 and base is not None:
            later = later_anchor_loss(model, base, tx, d_base, tau=cfg.decision_temperature)
            loss = loss + cfg.decision_later_weight * later
        return loss
    loss = torch.nn.functional.huber_loss(d, tx["y"] / scale, delta=cfg.huber_delta)
    if cfg.rank_weight > 0 and len(tx["pairs"]):
        a, b = tx["pairs"][:, 0], tx["pairs"][:, 1]
        loss = (
            loss
            + cfg.rank_weight * torch.nn.functional.softplus(-(d[a] - d[b]) / cfg.rank_temperature).mean()
        )
    return loss
