"""``later_swaps``: another scorer decides the beam's later swaps (selector/allocator.py, RESULTS.md 9k)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.allocator import SelectorAllocator, _ratio, _split_scorer
from causalcache_memory.selector.beam import beam_search


def _table(values: dict[int, float], n: int):
    """A set scorer whose ``Δ̂(j | C)`` is ``values.get(j, 0)`` whatever ``C``; records the sets it saw."""
    seen: list[tuple[int, ...]] = []

    def score(conds):
        seen.extend(conds)
        row = np.array([values.get(j, 0.0) for j in range(1, n + 1)])
        return np.tile(row, (len(conds), 1))

    return score, seen


def test_the_first_step_is_the_models_and_the_later_steps_the_other_scorers():
    # t = 9, B = 2: Recent-B = (7, 8). The model would restore events 2 and 3 (two swaps); the later
    # scorer rates every event alike, so it takes no second swap.
    first, first_seen = _table({2: 1.0, 3: 0.9}, 8)
    later, later_seen = _table({}, 8)
    alone = beam_search(_table({2: 1.0, 3: 0.9}, 8)[0], t=9, budget=2, beam_width=1, min_gain=0.1)
    split = beam_search(_split_scorer(first, later, (7, 8), 1.0), t=9, budget=2, beam_width=1, min_gain=0.1)
    assert alone.selected == (2, 3)
    assert split.selected in {(2, 7), (2, 8)} and split.top_gain == alone.top_gain  # one swap, the model's
    assert all(set(c) <= {7, 8} for c in first_seen) and later_seen  # the later scorer saw the later sets
    assert all(not set(c) <= {7, 8} for c in later_seen)


def test_later_gains_are_scaled_onto_the_models_threshold():
    # the later scorer's gain 0.3 clears its own threshold 0.2; scaled by 0.5 / 0.2 it clears the model's 0.5
    first, _ = _table({2: 1.0}, 8)
    later, _ = _table({3: 0.3}, 8)
    taken = beam_search(_split_scorer(first, later, (7, 8), _ratio(0.5, 0.2)), t=9, budget=2, min_gain=0.5)
    declined = beam_search(_split_scorer(first, later, (7, 8), _ratio(0.5, 0.4)), t=9, budget=2, min_gain=0.5)
    assert taken.selected == (2, 3) and len(set(declined.selected) - {7, 8}) == 1
    assert _ratio(0.5, 0.0) == _ratio(float("inf"), 0.2) == _ratio(0.0, 0.3) == 1.0


def test_the_same_model_for_later_swaps_decides_as_the_model_alone(trained):
    from causalcache_memory.selector.schema import NUM_FEATURES

    _, out, _ = trained
    # the paper's rule (every positive gain) on random features: the beam goes past its first swap
    alone = SelectorAllocator(out, min_gain=0.0, ood_guard=False)
    split = SelectorAllocator(out, min_gain=0.0, ood_guard=False, later_swaps=out)
    assert split.later is not None and alone.later is None
    rng = np.random.default_rng(0)
    several = 0
    for _ in range(20):
        events = rng.normal(size=(19, NUM_FEATURES)).astype(np.float32)
        a = alone.decide(events, t=20, budget=4, witness=None)
        b = split.decide(events, t=20, budget=4, witness=None)
        assert a.selected == b.selected
        several += len(set(a.selected) - set(range(16, 20))) > 1
    assert several, "no decision restored two events: the later step was never exercised"


def test_a_later_scorer_reading_other_features_is_refused(trained):
    _, out, _ = trained
    model = SelectorAllocator(out).model
    other = copy.copy(model)
    other.feature_names = model.feature_names[:-1]
    with pytest.raises(SelectorError, match=r"later_swaps=.*reads other features.*later_swaps: null"):
        SelectorAllocator(model, later_swaps=other)


def test_the_yaml_field_reaches_the_allocator(trained):
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.config import parse_config

    _, out, _ = trained
    cfg = parse_config(
        {
            "allocation": {
                "allocator": "selector",
                "selector": {"model_path": str(out), "later_swaps": str(out)},
            }
        }
    )
    assert cfg.allocation.selector.later_swaps == str(out)
    assert build_allocator(cfg.allocation).later is not None
