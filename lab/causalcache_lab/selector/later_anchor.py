"""Hold the search's second swap at the base's judgement while a fine-tune learns the first (PyTorch).

The deployed beam search (:mod:`~causalcache_memory.selector.beam`) takes a first swap out of Recent-B,
then scores further swaps conditioned on the set it reached. The labels train the first swap (the
decision loss, :mod:`.decision_loss`); they hold later decisions only where the teacher path goes on (a
few percent of states), and training those later decisions on labels lost to the bundle on the devmix
worlds (``decision_path_weight``, RESULTS.md 9k). A fine-tune leaves them to drift instead: on devmix it
dropped a second restoration the base makes, or took a second swap that evicted a recent screen holding
the evidence. This term asks the fine-tune to judge the second swap as its base does, on every state,
without labels.

For state ``s`` with first-decision entries ``e`` (swaps ``r -> j`` out of Recent-B, conditioning set
``C_e = Recent-B \\ {r}``), the base's first swap is ``e* = argmax_e d^base_e``, giving the reached set
``S_1 = C_{e*} ∪ {j*}``. Its second decisions condition on ``C_1(q) = S_1 \\ {q}`` for each recent member
``q ∈ C_{e*}``, and a move ``q -> j`` over the state's other candidates ``j`` (the first decision's
candidates but ``j*``) has predicted gain ``g(q, j) = Δ̂(j | C_1(q)) - Δ̂(q | C_1(q))``. With ``g`` under the
model and ``g^base`` under the frozen base, both in target-scale units:

    L_later = mean_{s, q, j} |g(q, j) - g^base(q, j)| / tau          L = L_decision + μ · L_later

Two-sided, unlike the first decision's anchor (:mod:`.decision_loss`): a second swap the fine-tune drops
and one it adds are both changes the labels do not support. The base's path is used, not the model's,
because the base's scores are only a sound target on sets the base itself reaches (letting the base score
the fine-tune's sets lost badly: RESULTS.md 9k, "FS"). Shapes follow :func:`.batches.collate`: ``sets``
``(K, M)``, ``mask`` ``(K, M)``, ``context`` ``(K, C)``, entries ``(L,)``; the term adds ``(B - 1)`` rows per
state to one forward pass of each model.

Off by default (``decision_later_weight: 0``): on the six devmix recordings μ = 1 made the fine-tune the
base (mean +0.000 over the bundle against +0.023 without the term) and μ = 0.01 lost more than no term
(−0.001, with devmix-02/7001 at −0.100); RESULTS.md 9n.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from causalcache_memory._optional import require

torch = require("torch", purpose="training the learned selector")

__all__ = ["later_anchor_loss", "second_decisions"]

Scorer = Callable[..., Any]


def second_decisions(tx: Mapping[str, Any], d_base: Any) -> dict[str, Any] | None:
    """The second-step conditioning sets of the base's first swap in every state of the batch ``tx``.

    Returns ``{"sets" (R, M), "mask" (R, M), "context" (R, C), "out" (R,), "cands" (R, N)}`` (``out`` the
    evicted recent event's row, ``cands`` a boolean mask of the moves' candidate rows), or None when no
    state has a first swap with a recent member left to evict and another candidate to take.
    """
    state, recent, group, cand = tx["state"], tx["recent"], tx["group"], tx["cand"]
    n_events = int(tx["events"].shape[0])
    rows, masks, ctx, outs, cands = [], [], [], [], []
    for s in range(int(tx["states"])):
        entries = torch.nonzero((state == s) & recent).flatten()
        if len(entries) == 0:
            continue
        best = int(entries[torch.argmax(d_base[entries])])
        k, j_star = int(group[best]), int(cand[best])
        others = torch.unique(cand[entries])
        others = others[others != j_star]
        members = torch.nonzero(tx["mask"][k] > 0).flatten()
        if len(others) == 0 or len(members) == 0:
            continue
        candidate_mask = torch.zeros(n_events, dtype=torch.bool)
        candidate_mask[others] = True
        for p in members.tolist():
            row = tx["sets"][k].clone()
            outs.append(int(row[p]))
            row[p] = j_star  # C_1(q) = C_{e*} \ {q} ∪ {j*}
            rows.append(row)
            masks.append(tx["mask"][k])
            ctx.append(tx["context"][k])
            cands.append(candidate_mask)
    if not rows:
        return None
    return {
        "sets": torch.stack(rows),
        "mask": torch.stack(masks),
        "context": torch.stack(ctx),
        "out": torch.tensor(outs, dtype=torch.long),
        "cands": torch.stack(cands),
    }


def later_anchor_loss(model: Scorer, base: Scorer, tx: Mapping[str, Any], d_base: Any, *, tau: float) -> Any:
    """``L_later`` of the batch ``tx`` (module doc): the mean absolute difference, in units of ``tau``,
    between the model's and the base's predicted gains of the second swaps on the base's path; 0 (with a
    gradient path) when the batch has no second decision."""
    second = second_decisions(tx, d_base)
    if second is None:
        return tx["events"].sum() * 0.0
    args = (tx["events"], second["sets"], second["mask"], second["context"])
    rows = torch.arange(len(second["out"]))
    scores = model(*args)  # (R, N)
    gains = scores - scores[rows, second["out"]][:, None]
    with torch.no_grad():
        base_scores = base(*args)
        base_gains = base_scores - base_scores[rows, second["out"]][:, None]
    return ((gains - base_gains).abs() / tau)[second["cands"]].mean()
