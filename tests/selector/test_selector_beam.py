from __future__ import annotations

import numpy as np
import pytest

from causalcache_memory.allocation import make_allocation, recent_b
from causalcache_memory.selector.beam import beam_search


def random_scorer(n: int, seed: int):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=n)
    inter = rng.normal(size=(n, n)) * 0.3

    def scorer(conds):
        out = np.zeros((len(conds), n))
        for k, c in enumerate(conds):
            out[k] = base + sum(inter[j - 1] for j in c)
        return out

    return scorer


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("budget", [1, 2, 4])
def test_random_scorers_give_exact_b_sets(seed, budget):
    t = 5 + seed
    res = beam_search(random_scorer(t - 1, seed), t=t, budget=budget, beam_width=3)
    alloc = make_allocation(res.selected, t=t, budget=budget, allocator="beam")  # raises if not exact-B
    assert len(alloc.selected) == min(budget, t - 1) and res.gain >= 0
    assert (res.gain == 0) == alloc.is_recent


@pytest.mark.parametrize("budget", [1, 2, 4])
def test_declining_every_swap_returns_recent_b(budget):
    t = 20

    def scorer(conds):  # recent events always have the higher marginal
        row = np.where(np.arange(1, t) >= t - budget, 5.0, 0.0) + np.linspace(0, 1, t - 1)
        return np.tile(row, (len(conds), 1))

    res = beam_search(scorer, t=t, budget=budget)
    assert res.selected == recent_b(t, budget) and res.gain == 0.0


def test_preferred_distant_event_is_swapped_in_for_the_weakest_recent():
    t, star = 30, 6
    recent = recent_b(t, 4)

    def scorer(conds):
        row = np.zeros(t - 1)
        row[[r - 1 for r in recent]] = [0.1, 0.5, 0.7, 0.9]  # oldest recent is the weakest
        row[star - 1] = 0.3
        return np.tile(row, (len(conds), 1))

    res = beam_search(scorer, t=t, budget=4)
    alloc = make_allocation(res.selected, t=t, budget=4, allocator="beam")
    assert alloc.k == 1 and alloc.promoted == (star,) and alloc.displaced == (recent[0],)
    assert res.gain == pytest.approx(0.2) and res.scores[star] == pytest.approx(0.2)


def test_additive_scorer_reaches_top_b():
    rng = np.random.default_rng(0)
    t, budget = 40, 4
    row = rng.normal(size=t - 1)
    res = beam_search(lambda conds: np.tile(row, (len(conds), 1)), t=t, budget=budget)
    assert res.selected == tuple(sorted(int(j) + 1 for j in np.argsort(-row)[:budget]))


def test_conditioning_on_the_selected_set_is_used():
    # event 3 is useful only while event 2 is absent (redundant evidence): the beam must not take both
    t, budget = 12, 2

    def scorer(conds):
        out = np.zeros((len(conds), t - 1))
        for k, c in enumerate(conds):
            out[k, 1] = 0.0 if 3 in c else 1.0
            out[k, 2] = 0.0 if 2 in c else 0.9
        return out

    res = beam_search(scorer, t=t, budget=budget, beam_width=4)
    assert len({2, 3} & set(res.selected)) == 1


def test_short_history_and_bad_width():
    assert beam_search(lambda c: None, t=3, budget=4).selected == (1, 2)
    assert beam_search(lambda c: None, t=1, budget=4).selected == ()
    with pytest.raises(ValueError):
        beam_search(lambda c: None, t=10, budget=2, beam_width=0)


def test_min_gain_declines_near_neutral_swaps() -> None:
    import numpy as np

    from causalcache_memory.selector.beam import beam_search

    def scorer(sets):
        row = np.zeros(9)
        row[1] = 0.05  # event 2 beats every recent event by 0.05
        return np.tile(row, (len(sets), 1))

    swapped = beam_search(scorer, t=10, budget=3).selected
    assert 2 in swapped and len(set(swapped) - {7, 8, 9}) == 1  # one swap (which recent slot is a tie)
    assert beam_search(scorer, t=10, budget=3, min_gain=0.1).selected == (7, 8, 9)  # Recent-B kept
    with pytest.raises(ValueError, match="min_gain"):
        beam_search(scorer, t=10, budget=3, min_gain=-1.0)


def test_min_gain_reaches_the_policy_from_config() -> None:
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.config import parse_config

    cfg = parse_config({"allocation": {"allocator": "selector", "selector": {"min_gain": 0.1}}})
    assert build_allocator(cfg.allocation).min_gain == 0.1
