"""Exact-B beam search over fidelity allocations, initialized at Recent-B (paper, Eq. 1 and the selector).

A state is an exact-B set ``S``. A move swaps a recent event ``r in S ∩ Recent-B`` out for a distant
event ``j ∉ S ∪ Recent-B``. With ``C = S \\ {r}`` the move's predicted gain is

    gain(r -> j | S) = Δ̂(j | C) - Δ̂(r | C)

and the move is admissible only when ``gain > min_gain`` (default 0): a distant event enters only by
beating the predicted marginal of the recent event it evicts. A positive ``min_gain`` is a deployment knob
that declines near-neutral swaps (fewer second passes); 0 is the paper's rule. The beam keeps the ``beam_width`` best sets by accumulated gain;
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

from causalcache_memory.allocation.base import recent_b

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
        top_gain: the best first swap's predicted gain, ``max gain(r -> j | Recent-B)`` over every move
            out of Recent-B whatever ``min_gain`` is (``-inf`` when no distant event exists); the
            quantity a pass-2 threshold is compared with (:mod:`~causalcache_memory.selector.threshold`).
    """

    selected: tuple[int, ...]
    gain: float
    scores: dict[int, float] = field(default_factory=dict)
    calls: int = 0
    top_gain: float = float("-inf")


def beam_search(
    scorer: SetScorer,
    *,
    t: int,
    budget: int,
    beam_width: int = 4,
    max_swaps: int | None = None,
    min_gain: float = 0.0,
    hold: Sequence[int] = (),
) -> BeamResult:
    """Best exact-B set under ``scorer`` reachable from Recent-B by admissible swaps (see module doc).

    ``hold``: events of Recent-B no swap may displace (the witness-source check,
    :mod:`~causalcache_memory.selector.witness_check`); they stay in every set, and ``top_gain`` and
    ``scores`` are those of the moves that remain. Events outside Recent-B are ignored.

    Vectorized over candidate moves: the beam is an ``(W, m)`` array of ascending sets (``m = |S|``);
    every step scores the ``K`` conditioning sets ``S \\ {r}`` in one call, masks the ``(K, N)`` gain
    matrix, keeps each row's ``beam_width`` best swaps, and ranks the new sets by
    ``(-accumulated gain, set)`` keeping each set's best total, as a dictionary-based search would.
    """
    if beam_width < 1:
        raise ValueError(f"beam_width={beam_width} must be >= 1")
    if not min_gain >= 0.0:
        raise ValueError(
            f"min_gain={min_gain} must be >= 0 (0 = take every swap with positive predicted gain)"
        )
    recent = recent_b(t, budget)
    n_events = t - 1
    if not recent or n_events == len(recent):
        return BeamResult(recent, 0.0)
    m = len(recent)
    limit = m if max_swaps is None else min(max_swaps, m)
    is_recent = np.zeros(n_events + 1, dtype=bool)  # indexed by event number
    is_recent[list(recent)] = True
    movable = is_recent.copy()  # recent events a swap may displace
    movable[[j for j in hold if j in recent]] = False
    recent_cols = np.asarray(recent, dtype=np.intp) - 1
    sets = np.array([recent], dtype=np.int64)  # (W, m) ascending
    accs = np.zeros(1, dtype=np.float64)
    best_total, best_set = 0.0, sets[0]
    first_scores: dict[int, float] = {}
    top_gain = float("-inf")
    calls = 0
    width = min(beam_width, n_events)
    for _ in range(limit):
        w_idx, c_idx = np.nonzero(movable[sets])  # moves in beam order, then r ascending
        n_moves = len(w_idx)
        if n_moves == 0:
            break
        rows = np.arange(n_moves)
        parents = sets[w_idx]  # (K, m)
        outs = parents[rows, c_idx]  # evicted recent event r per move
        keep = np.ones(parents.shape, dtype=bool)
        keep[rows, c_idx] = False
        conds = parents[keep].reshape(n_moves, m - 1)  # S \ {r}, ascending
        scores = np.asarray(scorer([tuple(c) for c in conds.tolist()]), dtype=np.float64)
        calls += 1
        if scores.shape != (n_moves, n_events):
            raise ValueError(f"scorer returned shape {scores.shape}, expected {(n_moves, n_events)}")
        if not first_scores:
            oldest = int(outs[0])  # the oldest recent event a swap may displace (recent[0] unless held)
            row = 0
            diff = scores[row] - scores[row, oldest - 1]
            first_scores = dict(zip(range(1, t), diff.tolist(), strict=True))
        gains = scores - scores[rows, outs - 1][:, None]
        gains[:, recent_cols] = -np.inf  # Recent-B never re-enters by a swap
        gains[rows[:, None], parents - 1] = -np.inf  # nor does an event already in S
        if calls == 1:
            top_gain = float(np.max(gains))
        top = np.argpartition(-gains, width - 1, axis=1)[:, :width]  # (K, width) column indices
        top_gains = gains[rows[:, None], top]
        kk, ii = np.nonzero(top_gains > min_gain)  # admissible swaps (NaN and -inf excluded)
        if len(kk) == 0:
            break
        new_sets = np.sort(np.concatenate([conds[kk], top[kk, ii, None] + 1], axis=1), axis=1)
        totals = accs[w_idx[kk]] + top_gains[kk, ii]
        # rank by (-total, set); the first occurrence of a set carries its best total
        order = np.lexsort((*new_sets.T[::-1], -totals))
        seen: set[tuple[int, ...]] = set()
        chosen: list[int] = []
        for i, key in zip(order.tolist(), map(tuple, new_sets[order].tolist()), strict=True):
            if key not in seen:
                seen.add(key)
                chosen.append(i)
                if len(chosen) == beam_width:
                    break
        sets, accs = new_sets[chosen], totals[chosen]
        if accs[0] > best_total:
            best_total, best_set = float(accs[0]), sets[0]
    return BeamResult(tuple(int(j) for j in best_set), float(best_total), first_scores, calls, top_gain)
