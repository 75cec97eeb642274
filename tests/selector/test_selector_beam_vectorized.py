"""The vectorized exact-B beam returns exactly what a straightforward set-based search returns."""

from __future__ import annotations

import numpy as np
import pytest

from causalcache_memory.allocation.base import recent_b
from causalcache_memory.selector.beam import beam_search


def reference_beam(scorer, *, t, budget, beam_width=4, max_swaps=None):
    """Plain Python/frozenset version of the search (one move at a time)."""
    recent = recent_b(t, budget)
    n = t - 1
    if not recent or n == len(recent):
        return recent, 0.0, {}, 0
    recent_set = frozenset(recent)
    limit = len(recent) if max_swaps is None else min(max_swaps, len(recent))
    beam = [(0.0, recent_set)]
    best = (0.0, recent_set)
    first: dict[int, float] = {}
    calls = 0
    width = min(beam_width, n)
    for _ in range(limit):
        moves = [(acc, s, r) for acc, s in beam for r in sorted(s & recent_set)]
        if not moves:
            break
        scores = np.asarray(scorer([tuple(sorted(s - {r})) for _, s, r in moves]), dtype=np.float64)
        calls += 1
        if not first:
            oldest = min(recent)
            row = [m[2] for m in moves].index(oldest)
            first = {j: float(scores[row, j - 1] - scores[row, oldest - 1]) for j in range(1, t)}
        candidates: dict[frozenset[int], float] = {}
        for k, (acc, s, r) in enumerate(moves):
            gains = scores[k] - scores[k, r - 1]
            gains[[j - 1 for j in s]] = -np.inf
            gains[[j - 1 for j in recent]] = -np.inf
            for idx in np.argpartition(-gains, width - 1)[:width]:
                gain = float(gains[idx])
                if gain > 0.0:
                    new = (s - {r}) | {int(idx) + 1}
                    candidates[new] = max(candidates.get(new, -np.inf), acc + gain)
        if not candidates:
            break
        ranked = sorted(candidates.items(), key=lambda kv: (-kv[1], sorted(kv[0])))[:beam_width]
        beam = [(total, s) for s, total in ranked]
        if beam[0][0] > best[0]:
            best = beam[0]
    return tuple(sorted(best[1])), float(best[0]), first, calls


def _random_scorer(rng: np.random.Generator, n: int, *, quantized: bool):
    """Deterministic scorer: a base marginal per event plus set-dependent interactions."""
    base = rng.normal(size=n)
    inter = rng.normal(scale=0.5, size=(n, n))
    if quantized:  # many exact ties between candidate swaps and between sets
        base, inter = np.round(base * 2) / 2, np.round(inter)

    def scorer(conds):
        out = np.empty((len(conds), n))
        for k, cond in enumerate(conds):
            idx = [j - 1 for j in cond]
            out[k] = base + (inter[:, idx].sum(1) if idx else 0.0)
        return out

    return scorer


@pytest.mark.parametrize("seed", range(40))
def test_matches_reference_on_random_scorers(seed):
    rng = np.random.default_rng(seed)
    t = int(rng.integers(2, 40))
    budget = int(rng.integers(1, 7))
    width = int(rng.integers(1, 6))
    max_swaps = None if seed % 3 else int(rng.integers(0, 4))
    scorer = _random_scorer(rng, t - 1, quantized=seed % 2 == 0)
    got = beam_search(scorer, t=t, budget=budget, beam_width=width, max_swaps=max_swaps)
    selected, gain, first, calls = reference_beam(
        scorer, t=t, budget=budget, beam_width=width, max_swaps=max_swaps
    )
    assert got.selected == selected
    assert got.gain == gain  # bit-identical accumulation
    assert got.scores == first
    assert got.calls == calls
    assert all(type(j) is int for j in got.selected)


def test_nan_scores_are_never_admissible():
    n = 12

    def scorer(conds):
        out = np.zeros((len(conds), n))
        out[:, 0] = np.nan
        out[:, 1] = 5.0
        return out

    got = beam_search(scorer, t=n + 1, budget=3)
    assert got.selected == reference_beam(scorer, t=n + 1, budget=3)[0]
    assert 1 not in got.selected and 2 in got.selected
