"""The budgeted value of the search's whole path: the first swap and the later swaps the labels cover.

:func:`~causalcache_memory.lab.selector.cross_fit.budgeted_values` scores a state by its fired *first*
swap only. The deployed beam search (:mod:`~causalcache_memory.selector.beam`) goes on from the set that
swap reached, taking further swaps while their predicted gain clears the same threshold. A fine-tune can
leave the first swap as it was and change the later ones (RESULTS.md 9k: on two devmix recordings a
fine-tune dropped second restorations the base made, lost 0.07 in closed loop, and the first-swap value
did not move). This value follows the path as far as the labels go.

For the states of one memory budget ``B``, ``m = floor(b · n)`` and the threshold ``τ`` the
``(m + 1)``-th largest first-swap prediction (0 when fewer states, never below 0), a state whose best first
swap ``(r_1 -> j_1)`` fires (among its ``B``'s ``m`` largest and ``d > 0``: the states
:func:`budgeted_values` fires) contributes

    v_i = y(r_1 -> j_1 | Recent-B) + Σ_{s >= 2} y(r_s -> j_s | S_{s-1})

where ``S_1 = Recent-B \\ {r_1} ∪ {j_1}``, and step ``s`` exists only while the labels hold a decision whose
base set is ``S_{s-1}`` (the teacher path, ``StateExample.decision``) and its best predicted swap there
has ``d > τ``. Each ``y`` is that decision's label (``Q`` after the swap minus ``Q`` of its base set), so
the sum telescopes to ``Q(S_last) - Q(Recent-B)``. Where the model leaves the teacher path, the path's
value is its labelled prefix: the estimate is exact when the model follows the teacher or stops, and
counts nothing for what it does off the path (a greedy walk; the deployed beam keeps 4 sets).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from causalcache_memory.allocation.base import recent_b
from causalcache_memory.lab.selector.examples import StateExample
from causalcache_memory.selector.threshold import DEFAULT_SECOND_PASS_BUDGET

__all__ = ["path_budgeted_values"]


def path_budgeted_values(
    diffs: Sequence[np.ndarray], examples: Sequence[StateExample], budget: float = DEFAULT_SECOND_PASS_BUDGET
) -> np.ndarray:
    """``(N,)`` path value ``v_i`` of each example (module doc); 0 where nothing fires.

    ``diffs[i]`` is the predicted ``d`` of every label entry of ``examples[i]`` (``(L,)``)."""
    out = np.zeros(len(examples))
    firsts = [(i, _best(diffs[i], ex, _decision_entries(ex, 0))) for i, ex in enumerate(examples)]
    firsts = [(i, e) for i, e in firsts if e is not None]
    by_budget: dict[int, list[tuple[int, int]]] = {}
    for i, entry in firsts:
        by_budget.setdefault(int(examples[i].budget), []).append((i, entry))
    for rows in by_budget.values():
        gains = np.array([diffs[i][e] for i, e in rows], dtype=np.float64)
        m = int(budget * len(rows))
        if m == 0:
            continue
        order = np.argsort(-gains, kind="stable")  # fires what budgeted_values fires
        tau = max(float(gains[order[m]]) if m < len(order) else 0.0, 0.0)
        for r in order[:m]:
            if gains[r] > 0.0:
                i, entry = rows[r]
                out[i] = _walk(diffs[i], examples[i], entry, tau)
    return out


def _walk(d: np.ndarray, ex: StateExample, entry: int, tau: float) -> float:
    """The first swap's label plus the labels of the later swaps the path takes (module doc)."""
    bases = _base_sets(ex)
    current = frozenset(recent_b(ex.t, ex.budget))
    value = 0.0
    for _ in range(len(current)):
        value += float(ex.y[entry])
        current = current - {int(ex.out[entry]) + 1} | {int(ex.cand[entry]) + 1}
        decision = bases.get(current)
        if decision is None:
            break
        nxt = _best(d, ex, _decision_entries(ex, decision))
        if nxt is None or not d[nxt] > tau:
            break
        entry = nxt
    return value


def _decision_entries(ex: StateExample, decision: int) -> np.ndarray:
    """Swap entries (``cand != out``) of one decision: 0 = out of Recent-B, others the teacher path's."""
    if decision == 0:
        if not len(ex.from_recent):
            return np.zeros(0, np.int64)
        return np.flatnonzero(ex.from_recent[ex.group] & (ex.cand != ex.out))
    if not len(ex.decision):
        return np.zeros(0, np.int64)
    return np.flatnonzero((ex.decision[ex.group] == decision) & (ex.cand != ex.out))


def _best(d: np.ndarray, ex: StateExample, entries: np.ndarray) -> int | None:
    return int(entries[int(np.argmax(np.asarray(d)[entries]))]) if len(entries) else None


def _base_sets(ex: StateExample) -> dict[frozenset[int], int]:
    """Base set (1-based events) -> decision, for the later decisions of the teacher path."""
    if not len(ex.decision):
        return {}
    out: dict[frozenset[int], int] = {}
    for k, decision in enumerate(ex.decision.tolist()):
        if len(ex.from_recent) and ex.from_recent[k]:
            continue
        rows = np.flatnonzero(ex.group == k)
        if len(rows):
            out.setdefault(frozenset(ex.conds[k]) | {int(ex.out[rows[0]]) + 1}, decision)
    return out
