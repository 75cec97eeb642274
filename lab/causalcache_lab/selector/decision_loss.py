"""The decision loss: train the selector on the choice it is deployed for, not on every label's value.

The deployed search takes, per state, the best first swap out of Recent-B and fires it when its predicted
gain ``d`` clears the threshold (:mod:`~causalcache_lab.selector.calibrate`). The regression loss
(Huber on ``y / scale`` plus pairwise ranks) spends its gradient on every label entry, and most entries of
a team's data say "keep Recent-B" with labels near zero: on the development worlds it lowers the bundled
selector's dev value from the first epoch (RESULTS.md 9f). This loss is a per-state softmax over that
choice. For state ``s`` with swap entries ``i`` out of Recent-B (``d_i`` their predicted gains, in target
scale units) and a "keep" option of logit 0:

    p_s(i) = exp(d_i / tau) / (1 + Σ_k exp(d_k / tau)),    p_s(keep) = 1 / (1 + Σ_k exp(d_k / tau))

    L = (1 / S) Σ_s w_s · (-log p_s(target_s))

``target_s`` is the entry with the largest label ``y`` when ``max y > min_gain · scale`` (the state shows a
swap that helps; ``w_s = 1``), else "keep" (``w_s = keep_weight``: those states only teach restraint).
Entries of teacher-path groups (not out of Recent-B) take no part. Shapes: ``d``, ``y``, ``state``,
``recent`` are ``(L,)`` over the collated batch (:func:`~causalcache_lab.selector.batches.collate`).

**Across states** (``state_rank_weight`` ρ > 0). The deployment fires pass 2 on its highest predicted gains
*across* decisions (a budget share, :mod:`~causalcache_memory.selector.threshold`), so what it acts on is
the order of states, which the per-state softmax leaves free wherever a state has no helpful swap
(``keep_weight`` 0). For the batch's helped states ``h`` (target entry ``t_h``) and the states ``n`` with a
swap but none that helps (their top predicted gain ``m_n = max_i d_i``):

    L_rank = mean_{h, n} softplus((m_n - d_{t_h}) / tau)            L = L_choice + ρ · L_rank

"the helpful swap of a helped state outranks the top swap of a state that nothing helps", without moving
the level of ``d`` against "keep" (0) as a positive ``keep_weight`` does. Off by default: on eleven devage
recordings it lowered the out-of-fold budgeted gain of a 4-epoch fine-tune (+0.018 at ρ 0, +0.010 at 0.1,
−0.017 at 1; RESULTS.md 9i); the held-out drift it was meant to answer has no development world to be
tested on yet.

**Anchored to the base** (``anchor_weight`` λ > 0, fine-tuning only; ``d_base`` the base's predictions on the
same batch, no gradient). For the states ``n`` with a swap but none that helps, with ``m_n`` and
``m^base_n`` their top predicted gains out of Recent-B under the model and under the base:

    L_anchor = mean_n relu(m_n - m^base_n) / tau                    L = L_choice + λ · L_anchor

"where the data shows no helpful swap, do not raise the top predicted gain above the base's". A state
without evidence may then stay as the base ranks it or fall, but cannot climb into the deployment's
pass-2 share past the base's own fires, which is what a 4-epoch fine-tune did on heldout-00's recording
(RESULTS.md 9i, 9j). Helped states are left to the choice term.

**Every decision of the search** (``path_weight`` π > 0). The deployed beam search takes a swap out of
Recent-B, then further swaps from the set it reached (:mod:`~causalcache_memory.selector.beam`), each scored
conditioned on that set. The terms above train only the first; a fine-tune leaves the later ones to drift
(on the devmix worlds it dropped a second restoration the base made, or took an extra swap that evicted
a recent screen holding the evidence; RESULTS.md 9k). The labels hold those later decisions on the teacher
path (groups whose base set ``S_p`` is not Recent-B, ``y_j = Q(S_p \\ {r} ∪ {j}) - Q(S_p)``). Each such set
is one more decision ``p`` of its state, with the same choice and anchor terms over its swaps:

    L = L_first + π · (L_choice^path + λ · L_anchor^path)

(``L_choice^path`` summed over the path decisions and divided by the batch's state count, as the first
term is; ``L_anchor^path`` the mean over path decisions nothing helps).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["decision_loss"]


def decision_loss(
    d: torch.Tensor,
    tx: Mapping[str, Any],
    scale: float,
    *,
    tau: float,
    min_gain: float,
    keep_weight: float,
    state_rank_weight: float = 0.0,
    anchor_weight: float = 0.0,
    d_base: torch.Tensor | None = None,
    path_weight: float = 0.0,
) -> torch.Tensor:
    """Mean over the batch's states of the weighted choice cross-entropy (module doc)."""
    state, recent, y = tx["state"], tx["recent"], tx["y"]
    n = int(tx["states"])
    rules = {"scale": scale, "tau": tau, "min_gain": min_gain, "keep_weight": keep_weight, "d_base": d_base}
    rules |= {"anchor_weight": anchor_weight, "per": n}  # every kind of decision is averaged over the states
    loss = d.sum() * 0.0
    if path_weight > 0 and bool(tx["path"].any()):  # later decisions of the teacher path (module doc)
        path = _choice(d, y, tx["decision"], tx["path"], int(tx["decisions"]), **rules)
        loss = loss + path_weight * (path[0] + anchor_weight * path[1])
    if not bool(recent.any()):
        return loss
    choice, anchor, helps, has_choice, first = _choice(d, y, state, recent, n, **rules)
    loss = loss + choice + anchor_weight * anchor
    helped, unhelped = helps & has_choice, ~helps & has_choice
    if state_rank_weight <= 0 or not bool(helped.any()) or not bool(unhelped.any()):
        return loss
    top_d = _top(d, state, recent, n)  # m_s: each state's top predicted gain out of Recent-B
    margin = (top_d[unhelped][None, :] - d[first[helped]][:, None]) / tau  # (H, N)
    return loss + state_rank_weight * torch.nn.functional.softplus(margin).mean()


def _choice(
    d: torch.Tensor,
    y: torch.Tensor,
    idx: torch.Tensor,
    mask: torch.Tensor,
    n: int,
    *,
    scale: float,
    tau: float,
    min_gain: float,
    keep_weight: float,
    anchor_weight: float,
    d_base: torch.Tensor | None,
    per: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One kind of decision (``idx`` each entry's decision of ``n``, ``mask`` its entries that are swaps):
    ``(choice, anchor, helps, has_choice, first)``: the summed weighted cross-entropy over ``per``, the mean
    anchor rise over the unhelped decisions (0 without a base), and per decision whether a swap helps,
    whether it has a swap, and its target entry."""
    z = torch.where(mask, d / tau, torch.full_like(d, -torch.inf))
    top = torch.zeros(n, dtype=d.dtype).scatter_reduce(0, idx, z, reduce="amax", include_self=True)
    top = top.detach()  # the keep logit 0 is in ``top`` (include_self), so exp never overflows
    mass = torch.exp(-top).index_add(0, idx, torch.where(mask, torch.exp(z - top[idx]), 0.0))
    lse = top + torch.log(mass)
    y_masked = torch.where(mask, y, torch.full_like(y, -torch.inf))
    best = _top(y, idx, mask, n)  # each decision's best label
    helps = best > min_gain * scale
    is_best = mask & (y_masked == best[idx]) & helps[idx]
    # one target entry per helped decision (the first of tied bests)
    first = torch.full((n,), len(d), dtype=torch.long).scatter_reduce(
        0, idx, torch.where(is_best, torch.arange(len(d)), len(d)), reduce="amin"
    )
    target = torch.where(helps, z[first.clamp(max=len(d) - 1)], torch.zeros(n, dtype=d.dtype))
    weight = torch.where(helps, 1.0, keep_weight)
    has_choice = torch.zeros(n, dtype=torch.bool).index_fill(0, idx[mask], True)
    choice = ((lse - target) * weight)[has_choice].sum() / max(per, 1)
    unhelped = ~helps & has_choice
    anchor = d.sum() * 0.0
    if anchor_weight > 0 and d_base is not None and bool(unhelped.any()):
        rise = (_top(d, idx, mask, n) - _top(d_base, idx, mask, n))[unhelped] / tau
        anchor = torch.relu(rise).mean()
    return choice, anchor, helps, has_choice, first


def _top(d: torch.Tensor, idx: torch.Tensor, mask: torch.Tensor, n: int) -> torch.Tensor:
    """``(n,)`` each decision's largest ``d`` over its entries in ``mask`` (-inf without one)."""
    return torch.full((n,), -torch.inf, dtype=d.dtype).scatter_reduce(
        0, idx, torch.where(mask, d, torch.full_like(d, -torch.inf)), reduce="amax"
    )
