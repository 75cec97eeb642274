"""The witness-source check (``allocation.selector.witness_check``; docs/notebook/results/guard_rule_try2.md)."""

from __future__ import annotations

import numpy as np
import pytest
from named_texts import NamedTexts, sha_of

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation import make_allocation, recent_b
from causalcache_memory.config.loader import parse_config
from causalcache_memory.errors import ConfigError, SelectorError
from causalcache_memory.selector.beam import beam_search
from causalcache_memory.selector.features import NUM_FEATURES
from causalcache_memory.selector.ood_refit import check_refit_warmup
from causalcache_memory.selector.screen_text import ScreenTextCache
from causalcache_memory.selector.witness_check import displaced_sources, witness_sources, witness_values
from causalcache_memory.trace import Trace

_sha = sha_of


_Texts = NamedTexts


def _trace(n: int) -> Trace:
    trace = Trace("Type the Balance of Ruby Savings into Amount")
    trace.observe(_sha("s0"))
    for j in range(1, n + 1):
        trace.record(Action("click", x=0.5, y=0.5), "click", _sha(f"s{j}"))
    return trace


# ---------------------------------------------------------------------------------------------- beam
def _weak_oldest_scorer(t: int, star: int):
    recent = recent_b(t, 4)

    def scorer(conds):
        row = np.zeros(t - 1)
        row[[r - 1 for r in recent]] = [0.1, 0.5, 0.7, 0.9]  # the oldest recent event is the weakest
        row[star - 1] = 0.6
        return np.tile(row, (len(conds), 1))

    return scorer, recent


def test_a_held_event_is_never_displaced_and_the_next_weakest_goes_instead():
    t, star = 30, 6
    scorer, recent = _weak_oldest_scorer(t, star)
    free = make_allocation(beam_search(scorer, t=t, budget=4).selected, t=t, budget=4, allocator="b")
    assert free.displaced == (recent[0],) and free.promoted == (star,)
    held = beam_search(scorer, t=t, budget=4, hold=(recent[0],))
    alloc = make_allocation(held.selected, t=t, budget=4, allocator="b")
    assert recent[0] in alloc.selected and alloc.promoted == (star,) and alloc.displaced == (recent[1],)
    assert held.top_gain == pytest.approx(0.1)  # the best move left: star for recent[1]


def test_holding_every_recent_event_returns_recent_b():
    t = 30
    scorer, recent = _weak_oldest_scorer(t, 6)
    res = beam_search(scorer, t=t, budget=4, hold=recent)
    assert res.selected == recent and res.gain == 0.0 and res.top_gain == float("-inf")


@pytest.mark.parametrize("seed", range(12))
def test_random_scorers_keep_every_held_event(seed):
    rng = np.random.default_rng(seed)
    t = 12 + seed
    base, inter = rng.normal(size=t - 1), 0.3 * rng.normal(size=(t - 1, t - 1))

    def scorer(conds):
        return np.stack([base + sum((inter[j - 1] for j in c), np.zeros(t - 1)) for c in conds])

    recent = recent_b(t, 4)
    hold = tuple(int(j) for j in rng.choice(recent, size=2, replace=False))
    res = beam_search(scorer, t=t, budget=4, beam_width=3, hold=hold)
    assert set(hold) <= set(res.selected) and len(res.selected) == 4


# ---------------------------------------------------------------------------------------------- sources
def test_the_sources_are_the_recent_screens_showing_the_typed_value():
    trace = _trace(10)  # recent = 6..9 at t = 11; the current screen is v_10
    cache = ScreenTextCache(
        _Texts(
            {"s7": "Ruby Savings\nBalance  $12,034.10", "s4": "Balance $12,034.10", "s10": "Transfer form"}
        )
    )
    typed = Action("type", text="$12,034.10", x=0.5, y=0.5)
    assert witness_values(typed) == {"12,034.10"}
    assert witness_sources(cache, trace, 4, typed) == (7,)  # s4 shows it too, but is outside Recent-B
    assert displaced_sources((7,), (2, 4, 8, 9)) == (7,) and displaced_sources((7,), (2, 7, 8, 9)) == ()


def test_no_source_without_a_value_or_when_the_current_screen_shows_it():
    trace = _trace(10)
    texts = {"s7": "Balance $12,034.10", "s10": "Transfer form"}
    cache = ScreenTextCache(_Texts(texts))
    assert witness_sources(cache, trace, 4, Action("type", text="see attached")) == ()
    assert witness_sources(cache, trace, 4, Action("click", x=0.1, y=0.1)) == ()
    assert witness_sources(cache, trace, 4, None) == ()
    assert witness_sources(None, trace, 4, Action("type", text="12,034.10")) == ()
    shown = ScreenTextCache(_Texts({**texts, "s10": "Amount  12,034.10"}))
    assert witness_sources(shown, trace, 4, Action("type", text="12,034.10")) == ()


# ---------------------------------------------------------------------------------------------- allocator
def _swapping_state(allocator, t: int = 14):
    """Features on which the unchecked selector swaps (found by seed; the scorer is the bundled one)."""
    for seed in range(200):
        events = np.random.default_rng(seed).random((t - 1, NUM_FEATURES)).astype(np.float32)
        alloc = allocator.decide(events, t=t, budget=4, witness=None)
        if alloc.k > 0:
            return events, alloc
    pytest.skip("no random state made the bundled scorer swap")


def test_the_selector_refuses_a_set_that_displaces_a_source_and_keeps_it():
    from causalcache_memory.selector.allocator import SelectorAllocator

    allocator = SelectorAllocator(ood_guard=False, min_gain=0.0, share_window=None, witness_check=True)
    t = 14
    events, free = _swapping_state(allocator, t)
    gone = free.displaced[0]
    checked = allocator.decide(events, t=t, budget=4, witness=None, sources=(gone,))
    assert checked.info["witness_kept"] == [gone] and gone in checked.selected
    kept = free.selected[-1]  # a source the free set keeps: the check changes nothing
    same = allocator.decide(events, t=t, budget=4, witness=None, sources=(kept,))
    assert same.selected == free.selected and "witness_kept" not in same.info


def test_open_warmup_does_not_decline_then_the_refitted_guard_judges():
    from causalcache_memory.selector.allocator import SelectorAllocator

    allocator = SelectorAllocator(
        ood_refit=30, ood_refit_warmup="open", witness_check=True, share_window=None
    )
    rng = np.random.default_rng(0)
    events = np.clip(rng.random((11, NUM_FEATURES)) * 3.0, 0, 3)  # far from any training screen
    infos = [allocator.decide(events + 0.01 * rng.random(events.shape), t=12, budget=4, witness=None).info
             for _ in range(31)]  # fmt: skip
    assert all(i["ood_refit"] == "warmup" and "fallback" not in i for i in infos[:29])
    assert infos[-1]["ood_refit"] == "refit" and "ood_distance" in infos[-1]
    far = allocator.decide(events + 50.0, t=12, budget=4, witness=None).info
    assert far.get("fallback") == "ood"  # after the refit the covariate guard declines again


def test_the_rule_is_the_default_and_the_guard_before_it_is_three_keys_away():
    from causalcache_memory.allocation.registry import build_allocator
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

    def build(sel: dict | None):
        section = {"allocator": "selector", **({"selector": sel} if sel is not None else {})}
        return build_allocator(parse_config({"allocation": section}).allocation)

    for allocator in (
        build(None),
        build({}),
        build({"ood_refit": 64, "ood_refit_warmup": "open", "witness_check": True}),
        SelectorAllocator(),
    ):
        assert allocator.witness_check and allocator.open_warmup and allocator.refit.warmup == 64
    for before in (build(GUARD_BEFORE_TRY2), SelectorAllocator(**GUARD_BEFORE_TRY2)):
        assert not before.witness_check and not before.open_warmup and before.refit is None
    assert build({"ood_refit_warmup": "bundled"}).refit.warmup == 64  # guard try 1


def test_turning_one_part_of_the_rule_off_alone_is_refused_with_the_way_out():
    from causalcache_memory.selector.allocator import SelectorAllocator

    for bad in (
        {"ood_refit": None},
        {"witness_check": False},
        {"ood_refit_warmup": "open", "ood_refit": None, "witness_check": True},
        {"ood_refit": 64, "ood_refit_warmup": "open", "witness_check": False},
    ):
        with pytest.raises(ConfigError, match=r"ood_refit_warmup='open' needs.*ood_refit_warmup: bundled"):
            parse_config({"allocation": {"allocator": "selector", "selector": bad}})
        with pytest.raises(SelectorError, match="ood_refit_warmup='open' needs"):
            SelectorAllocator(**bad)
    with pytest.raises(SelectorError, match="ood_refit_warmup='later' must be one of bundled, open"):
        check_refit_warmup("later", 64, True)
