"""Exact-B beam search (``selector/beam.py``): the contract points the mutation run found unchecked.

The beam keeps *each row's* ``beam_width`` best swaps and the ``beam_width`` best sets (default 4), the
answer is the best set seen (a later, worse or merely equal, step never replaces it), every scorer call is
checked for its shape, and the result is an immutable record.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from causalcache_memory.allocation import recent_b
from causalcache_memory.selector.beam import BeamResult, beam_search


def table_scorer(t: int, marginal):
    """``Δ̂(j | C) = marginal(j, C)`` for events ``j = 1..t-1``, one row per conditioning set."""

    def scorer(conds):
        return np.array([[marginal(j, frozenset(c)) for j in range(1, t)] for c in conds], dtype=float)

    return scorer


def stepping_stones(j: int, cond: frozenset[int]) -> float:
    """t = 12, B = 2, Recent-B = (10, 11). Event 11 is worth 100 whatever is held, event 10 nothing, so
    only event 10 is ever worth evicting first. Against 10 the distant events gain 9: 5, 8: 4, 7: 3,
    6: 2, 5: 1 (the 1st..5th best swaps); event 1 pays off only next to a stepping stone: 150 next to
    event 6 (beats event 11 by 50), 200 next to event 5 (by 100)."""
    if j == 11:
        return 100.0
    if j == 1:
        return 200.0 if 5 in cond else 150.0 if 6 in cond else 0.0
    return {9: 5.0, 8: 4.0, 7: 3.0, 6: 2.0, 5: 1.0}.get(j, 0.0)


@pytest.mark.parametrize(
    ("beam_width", "selected", "gain"),
    [
        (1, (9, 11), 5.0),  # greedy: the best first swap, then nothing beats event 11
        (3, (9, 11), 5.0),  # the 4th-best first swap (event 6) is not kept
        (4, (1, 6), 2.0 + 50.0),  # event 6 kept as the 4th-best swap: event 1 follows
        (5, (1, 5), 1.0 + 100.0),  # event 5 kept as the 5th-best swap: the larger payoff
    ],
)
@pytest.mark.parametrize("unscorable", [(), (3,), (2, 4)])
def test_each_row_keeps_its_beam_width_best_swaps(unscorable, beam_width: int, selected, gain: float) -> None:
    """The beam is what lets a swap that is only k-th best now (k <= beam_width) unlock a later gain; a
    search that kept fewer, or arbitrary, swaps per row would miss the payoff. A scorer may return NaN
    for events it cannot score: such an event is never admissible and leaves the ranking of the other
    swaps as it was (NaN also sends NumPy's partition down its comparison-based path)."""

    def marginal(j: int, cond: frozenset[int]) -> float:
        return float("nan") if j in unscorable else stepping_stones(j, cond)

    res = beam_search(table_scorer(12, marginal), t=12, budget=2, beam_width=beam_width)
    assert (res.selected, res.gain) == (selected, gain)


def test_the_default_beam_width_is_4() -> None:
    """The documented default (``beam_width: int = 4``, the config default too): on the stepping-stone
    scorer a width of 3 stops at (9, 11) and 5 reaches (1, 5); 4 reaches (1, 6)."""
    scorer = table_scorer(12, stepping_stones)
    res = beam_search(scorer, t=12, budget=2)
    assert res == beam_search(scorer, t=12, budget=2, beam_width=4)
    assert (res.selected, res.gain) == ((1, 6), 52.0)


def payoff_after_a_weaker_swap(payoff: float):
    """t = 12, B = 2, Recent-B = (10, 11); event 11 worth 100, event 10 nothing. First step: event 9 gains
    3, event 8 gains 1. Second step: nothing beats event 11 next to event 9, but next to event 8 event 1
    is worth ``payoff`` (total 1 + payoff - 100)."""

    def marginal(j: int, cond: frozenset[int]) -> float:
        if j == 11:
            return 100.0
        if j == 1:
            return payoff if 8 in cond else 0.0
        return {9: 3.0, 8: 1.0}.get(j, 0.0)

    return table_scorer(12, marginal)


@pytest.mark.parametrize(("payoff", "selected", "gain"), [(101.0, (9, 11), 3.0), (102.0, (9, 11), 3.0)])
def test_the_answer_is_the_best_set_seen_and_ties_keep_the_earlier_set(payoff, selected, gain) -> None:
    """The second step's best set totals 2.0 (payoff 101) or exactly 3.0 (payoff 102): a worse later set
    never replaces the best set seen, and an equal total reached with one more swap is not a strict
    improvement (the same strict rule as for a single swap), so the set with fewer swaps stays."""
    res = beam_search(payoff_after_a_weaker_swap(payoff), t=12, budget=2, beam_width=2)
    assert (res.selected, res.gain, res.calls) == (selected, gain, 2)
    better = beam_search(payoff_after_a_weaker_swap(103.0), t=12, budget=2, beam_width=2)
    assert (better.selected, better.gain) == ((1, 8), 4.0)  # control: a strictly better later set wins


@pytest.mark.parametrize("shape", [(2, 10), (3, 9), (1, 9)])
def test_a_scorer_of_any_other_shape_is_refused(shape) -> None:
    """t = 10, B = 2: the first step scores K = 2 conditioning sets over N = 9 events. Extra rows or
    columns mean the scorer is misaligned with the events, as much as missing ones."""
    with pytest.raises(ValueError, match=r"expected \(2, 9\)"):
        beam_search(lambda conds: np.zeros(shape), t=10, budget=2)


def test_the_beam_never_holds_more_than_beam_width_sets_even_when_wide() -> None:
    """Every step scores ``|beam| * |S ∩ Recent-B|`` conditioning sets in one call, so the beam width
    bounds the cost of a step. With t = 71, B = 4 and every swap admissible the first step offers
    4 * 66 = 264 distinct sets; a beam of 260 (the lab ladder accepts any width >= 1) keeps 260."""
    t, budget, width = 71, 4, 260
    value = np.linspace(1.0, 2.0, t - 1)  # distinct, all positive: every distant event beats ...
    value[t - 1 - budget :] = 0.0  # ... every recent event, worth nothing
    sizes: list[int] = []

    def scorer(conds):
        sizes.append(len(conds))
        return np.tile(value, (len(conds), 1))

    res = beam_search(scorer, t=t, budget=budget, beam_width=width)
    assert sizes == [4, 3 * width, 2 * width, 1 * width]
    assert res.selected == tuple(range(t - 1 - budget - 3, t - 1 - budget + 1))  # the 4 most valuable
    assert res.calls == 4 and res.gain == pytest.approx(float(value[res.selected[0] - 1 : 66].sum()))


def test_search_options_are_keyword_only() -> None:
    """``t`` and ``budget`` are both small ints: ``beam_search(scorer, 10, 2)`` could silently search
    decision 2 with budget 10, so they must be named; the scorer may be named too."""
    scorer = table_scorer(10, lambda j, cond: 0.0)
    with pytest.raises(TypeError):
        beam_search(scorer, 10, 2)  # type: ignore[misc]
    assert beam_search(scorer=scorer, t=10, budget=2).selected == recent_b(10, 2)


def test_results_are_frozen_slotted_records() -> None:
    """The result feeds ``make_allocation`` and the decision log: it cannot be edited in between, and
    (one per decision) carries no per-instance ``__dict__``."""
    res = beam_search(table_scorer(12, stepping_stones), t=12, budget=2)
    assert isinstance(res, BeamResult)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.selected = (1, 2)  # type: ignore[misc]
    assert not hasattr(res, "__dict__")


def reference_search(scorer, *, t: int, budget: int, beam_width: int):
    """The search of the module doc written over frozensets, one move at a time: swap a recent ``r`` in
    ``S`` for a distant ``j`` not in ``S`` when ``Δ̂(j | S - {r}) - Δ̂(r | S - {r}) > 0``, per move only the
    ``beam_width`` best swaps (ties at that boundary as ``np.argpartition`` orders the move's row), the
    ``beam_width`` best sets by ``(-total, set)``, the best set seen."""
    recent = frozenset(recent_b(t, budget))
    beam, best = [(0.0, recent)], (0.0, recent)
    width = min(beam_width, t - 1)
    for _ in range(len(recent)):
        moves = [(acc, s, r) for acc, s in beam for r in sorted(s & recent)]
        scores = np.asarray(scorer([tuple(sorted(s - {r})) for _, s, r in moves]), dtype=float)
        found: dict[frozenset[int], float] = {}
        for row, (acc, s, r) in zip(scores, moves, strict=True):
            gains = row - row[r - 1]
            gains[[j - 1 for j in s | recent]] = -np.inf
            for col in np.argpartition(-gains, width - 1)[:width]:
                if gains[col] > 0.0:
                    new = (s - {r}) | {int(col) + 1}
                    found[new] = max(found.get(new, -np.inf), acc + float(gains[col]))
        if not found:
            break
        ranked = sorted(found.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[:beam_width]
        beam = [(total, s) for s, total in ranked]
        best = beam[0] if beam[0][0] > best[0] else best
    return tuple(sorted(best[1])), best[0]


def tied_scorer_with_unscorable_events(seed: int, n: int):
    """Small-integer marginals (exact ties everywhere) with set interactions; 1 event in 8 is NaN."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-2, 3, size=n).astype(float)
    inter = rng.integers(-1, 2, size=(n, n)) * (rng.random((n, n)) < 0.2)
    unscorable = rng.choice(n, size=max(1, n // 8), replace=False)

    def scorer(conds):
        out = np.array([base + inter[:, [j - 1 for j in c]].sum(axis=1) for c in conds])
        out[:, unscorable] = np.nan
        return out

    return scorer


@pytest.mark.parametrize(("seed", "t", "budget"), [(4, 40, 6), (12, 40, 4), (18, 50, 3), (28, 40, 4)])
def test_unscorable_events_and_ties_match_the_set_based_search(seed: int, t: int, budget: int) -> None:
    """The vectorized search returns exactly what the set-based search of the module doc returns ("as a
    dictionary-based search would"), also when the scorer yields NaN for some events and many swaps tie.
    Which of several exactly tied swaps a move keeps at the width boundary is the partition's choice
    over the whole row, so it depends on the masked entries too: events already in ``S`` and Recent-B
    must be masked exactly as the set-based search masks them (-inf), not merely made inadmissible."""
    scorer = tied_scorer_with_unscorable_events(seed, t - 1)
    res = beam_search(scorer, t=t, budget=budget)
    assert (res.selected, res.gain) == reference_search(scorer, t=t, budget=budget, beam_width=4)
