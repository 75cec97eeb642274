"""Exact-B beam search over fidelity allocations, initialized at Recent-B (paper, Eq. 1 and the selector).

A state is an exact-B set ``S``. A move swaps a recent event ``r in S ∩ Recent-B`` out for a distant
event ``j ∉ S ∪ Recent-B``. With ``C = S \\ {r}`` the move's predicted gain is

    gain(r -> j | S) = Δ̂(j | C) - Δ̂(r | C)

and the move is admissible only when ``gain > 0``: a distant event enters only by beating the predicted
marginal of the recent event it evicts. The beam keeps the ``beam_width`` best sets by accumulated gain;
the answer is the best set seen, which is Recent-B itself when every swap is declined. ``|S|`` never
changes, so the result is exact-B by construction; ``k = |S \\ Recent-B|`` is whatever the search finds.

The search needs only a *set scorer*: ``scorer(conditioning_sets) -> (K, N)`` array whose row ``k`` holds
``Δ̂(j | conditioning_sets[k])`` for every event ``j = 1..N`` in column ``j - 1``. All conditioning sets
of one beam step are scored in one call (one onnxruntime run per step).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..allocation.base import recent_b

__all__ = ["BeamResult", "SetScorer", "beam_search"]

#: ``scorer(conditioning_sets) -> (K, N)`` predicted marginals; event ``j`` is column ``j - 1``.
SetScorer = Callable[[Sequence[tuple[int, ...]]], np.ndarray]


@dataclass(frozen=True, slots=True)
class BeamResult:
    """Outcome of :func:`beam_search`.

    Attributes:
        selected: the chosen exact-B set, ascending.
        gain: accumulated predicted gain over Recent-B (0.0 when every swap was declined).
        scores: ``j -> gain(oldest recent -> j | Recent-B)`` for every event (0 for the displaced slot),
            from the first beam step; for logs.
        calls: number of scorer calls made.
    """

    selected: tuple[int, ...]
    gain: float
    scores: dict[int, float] = field(default_factory=dict)
    calls: int = 0


def beam_search(
    scorer: SetScorer, *, t: int, budget: int, beam_width: int = 4, max_swaps: int | None = None
) -> BeamResult:
    """Best exact-B set under ``scorer`` reachable from Recent-B by admissible swaps (see module doc)."""
    if beam_width < 1:
        raise ValueError(f"beam_width={beam_width} must be >= 1")
    recent = recent_b(t, budget)
    n_events = t - 1
    if not recent or n_events == len(recent):
        return BeamResult(recent, 0.0)
    recent_set = frozenset(recent)
    limit = len(recent) if max_swaps is None else min(max_swaps, len(recent))
    beam: list[tuple[float, frozenset[int]]] = [(0.0, recent_set)]
    best = (0.0, recent_set)
    first_scores: dict[int, float] = {}
    calls = 0
    distant = np.ones(n_events, dtype=bool)
    distant[[r - 1 for r in recent]] = False
    for _ in range(limit):
        moves = [(acc, s, r) for acc, s in beam for r in sorted(s & recent_set)]
        if not moves:
            break
        conds = [tuple(sorted(s - {r})) for _, s, r in moves]
        scores = np.asarray(scorer(conds), dtype=np.float64)
        calls += 1
        if scores.shape != (len(conds), n_events):
            raise ValueError(f"scorer returned shape {scores.shape}, expected {(len(conds), n_events)}")
        if not first_scores:
            oldest = min(recent)
            row = moves.index(next(m for m in moves if m[2] == oldest))
            first_scores = {j: float(scores[row, j - 1] - scores[row, oldest - 1]) for j in range(1, t)}
        candidates: dict[frozenset[int], float] = {}
        free = np.tile(distant, (len(moves), 1))
        for k, (_, s, _) in enumerate(moves):
            free[k, [j - 1 for j in s]] = False
        outs = np.array([r - 1 for _, _, r in moves])
        gains = scores - scores[np.arange(len(moves)), outs][:, None]
        gains[~free] = -np.inf
        width = min(beam_width, n_events)
        top = np.argpartition(-gains, width - 1, axis=1)[:, :width]
        for k, (acc, s, r) in enumerate(moves):
            for idx in top[k]:
                gain = float(gains[k, idx])
                if not gain > 0.0:
                    continue
                new = (s - {r}) | {int(idx) + 1}
                if acc + gain > candidates.get(new, -np.inf):
                    candidates[new] = acc + gain
        if not candidates:
            break
        ranked = sorted(candidates.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[:beam_width]
        beam = [(total, s) for s, total in ranked]
        if beam[0][0] > best[0]:
            best = beam[0]
    return BeamResult(tuple(sorted(best[1])), float(best[0]), first_scores, calls)
