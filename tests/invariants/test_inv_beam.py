"""The beam takes a swap only when it strictly beats the event it displaces (paper: gain > 0).

An exact tie is declined, so the result is Recent-B; and because a declined move is never explored, a
distant event that would only pay off *after* a tied swap is never reached either.
"""

from __future__ import annotations

import numpy as np
import pytest

from causalcache_memory.allocation import recent_b
from causalcache_memory.selector.beam import beam_search


def additive(t: int, values: dict[int, float]):
    """``Δ̂(j | C) = values[j]`` whatever ``C`` (0 for events not listed)."""
    row = np.zeros(t - 1)
    for j, v in values.items():
        row[j - 1] = v

    def scorer(conds):
        return np.tile(row, (len(conds), 1))

    return scorer


@pytest.mark.parametrize("beam_width", [1, 2, 4, 8])
@pytest.mark.parametrize(("t", "budget"), [(6, 1), (10, 2), (20, 4), (30, 8)])
def test_an_exact_tie_with_the_weakest_recent_event_returns_recent_b(t, budget, beam_width) -> None:
    recent = recent_b(t, budget)
    values = {r: 1.0 + i for i, r in enumerate(recent)}  # the oldest recent event is the weakest (1.0)
    values[1] = 1.0  # a distant event exactly as good as the weakest recent one
    res = beam_search(additive(t, values), t=t, budget=budget, beam_width=beam_width)
    assert res.selected == recent and res.gain == 0.0
    assert res.scores[1] == 0.0  # the logged gain of the tied swap is exactly zero


@pytest.mark.parametrize("beam_width", [1, 4])
def test_a_tied_swap_is_not_a_stepping_stone(beam_width) -> None:
    """Event 2 gains 1.0 only when event 1 is already in S; event 1 itself only ties. Accepting the tie
    (``>=``) would reach {1, 2, ...}; the strict rule stops at Recent-B."""
    t, budget = 12, 4
    recent = recent_b(t, budget)

    def scorer(conds):
        out = np.zeros((len(conds), t - 1))
        for k, c in enumerate(conds):
            out[k, 0] = 0.0  # event 1: ties with every recent event (all 0)
            out[k, 1] = 1.0 if 1 in c else 0.0  # event 2: valuable only next to event 1
        return out

    res = beam_search(scorer, t=t, budget=budget, beam_width=beam_width)
    assert res.selected == recent and res.gain == 0.0


def test_a_strictly_better_event_is_swapped_in() -> None:
    """Control case: the same set-up with the distant event a hair better than the weakest recent."""
    t, budget = 20, 4
    recent = recent_b(t, budget)
    values = {r: 1.0 + i for i, r in enumerate(recent)}
    values[1] = 1.0 + 1e-9
    res = beam_search(additive(t, values), t=t, budget=budget)
    assert res.selected == (1, *recent[1:]) and res.gain == pytest.approx(1e-9)


def test_min_gain_is_also_strict() -> None:
    t, budget = 20, 4
    recent = recent_b(t, budget)
    values = {r: 1.0 for r in recent}
    values[3] = 1.25  # gain exactly 0.25 over every recent event
    assert beam_search(additive(t, values), t=t, budget=budget, min_gain=0.25).selected == recent
    assert 3 in beam_search(additive(t, values), t=t, budget=budget, min_gain=0.2).selected


def test_bad_arguments_and_a_wrong_scorer_shape_are_refused() -> None:
    scorer = additive(10, {})
    with pytest.raises(ValueError, match="beam_width=0 must be >= 1"):
        beam_search(scorer, t=10, budget=2, beam_width=0)
    with pytest.raises(ValueError, match="min_gain=nan must be >= 0"):
        beam_search(scorer, t=10, budget=2, min_gain=float("nan"))
    with pytest.raises(ValueError, match=r"scorer returned shape \(2, 8\), expected \(2, 9\)"):
        beam_search(lambda conds: np.zeros((len(conds), 8)), t=10, budget=2)


@pytest.mark.parametrize(("t", "budget"), [(1, 4), (3, 4), (5, 4), (5, 0)])
def test_no_distant_event_means_no_scorer_call(t: int, budget: int) -> None:
    def scorer(conds):  # pragma: no cover - must not be called
        raise AssertionError("scored although nothing can be swapped")

    res = beam_search(scorer, t=t, budget=budget)
    assert res.selected == recent_b(t, budget) and res.gain == 0.0 and res.calls == 0 and res.scores == {}


def test_one_call_per_step_and_first_step_scores_for_every_event() -> None:
    t, budget = 12, 2
    recent = recent_b(t, budget)
    values = {1: 5.0, 2: 4.0, recent[0]: 1.0, recent[1]: 2.0}
    res = beam_search(additive(t, values), t=t, budget=budget, beam_width=2)
    assert res.selected == (1, 2) and res.gain == pytest.approx((5.0 - 1.0) + (4.0 - 2.0))
    assert res.calls == 2  # one scorer call per step, at most |S| = 2 steps
    assert set(res.scores) == set(range(1, t))
    assert res.scores[1] == pytest.approx(4.0) and res.scores[recent[0]] == 0.0
    limited = beam_search(additive(t, values), t=t, budget=budget, max_swaps=1)
    assert limited.selected == (1, recent[1]) and limited.calls == 1
