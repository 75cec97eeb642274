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
