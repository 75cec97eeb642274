"""The OOD guard refitted on the deployment's own decisions (``ood_refit``; docs/notebook/results/guard_rule.md)."""

from __future__ import annotations

import numpy as np
import pytest

from causalcache_memory.config.loader import parse_config
from causalcache_memory.errors import ConfigError, SelectorError
from causalcache_memory.selector.features import NUM_FEATURES
from causalcache_memory.selector.ood import RobustGuard
from causalcache_memory.selector.ood_refit import RefitGuard, check_refit, refit_location_scale

NAMES = [f"f{i}" for i in range(12)]


def _states(rng: np.random.Generator, n: int, base: np.ndarray, spread: float = 0.05) -> np.ndarray:
    mix = rng.normal(size=(3, len(base)))
    return base + spread * (rng.normal(size=(n, 3)) @ mix + 0.3 * rng.normal(size=(n, len(base))))


@pytest.fixture()
def guard_and_rng() -> tuple[RobustGuard, np.random.Generator]:
    rng = np.random.default_rng(3)
    base = rng.random(len(NAMES))
    return RobustGuard.fit(NAMES, _states(rng, 200, base), _states(rng, 100, base)), rng


def test_a_shifted_deployment_is_refused_during_warmup_and_judged_against_itself_after(guard_and_rng):
    guard, rng = guard_and_rng
    shifted = guard.center + 3.0 * guard.scale  # every guarded column far from training
    deployment = _states(rng, 100, np.resize(shifted, len(NAMES)))
    assert all(guard.is_ood(z)[0] for z in deployment[:40])  # the bundled guard: idle on this team
    refit = RefitGuard(guard, 40)
    verdicts = [refit.observe(z).is_ood(z)[0] for z in deployment[:39]]
    assert all(verdicts) and not refit.refitted  # warm-up: exactly today's guard
    refit.observe(deployment[39])
    assert refit.refitted
    later = [refit.current.is_ood(z)[0] for z in deployment[40:]]
    assert sum(later) <= 0.1 * len(later)  # typical states of this deployment are accepted
    far = deployment[40].copy()
    far[list(guard.columns)] += 20 * refit.current.scale  # far from this deployment's own states
    assert refit.current.is_ood(far)[0]


def test_the_refit_changes_center_and_scale_only(guard_and_rng):
    guard, rng = guard_and_rng
    z = _states(rng, 50, guard.center + 0.5)
    new = refit_location_scale(guard, z)
    cols = list(guard.columns)
    np.testing.assert_allclose(new.center, np.median(z[:, cols], axis=0))
    assert (new.scale >= 0.1).all()
    np.testing.assert_array_equal(new.precision, guard.precision)
    assert new.threshold == guard.threshold and dict(new.mask_thresholds) == dict(guard.mask_thresholds)


def test_non_finite_states_do_not_count_towards_the_warmup(guard_and_rng):
    guard, rng = guard_and_rng
    refit = RefitGuard(guard, 30)
    for _ in range(40):
        refit.observe(np.full(len(NAMES), np.nan))
    assert not refit.refitted
    for z in _states(rng, 30, guard.center):
        refit.observe(z)
    assert refit.refitted


@pytest.mark.parametrize("bad", [0, 29, True, 64.0, "64"])
def test_bad_warmups_are_refused_naming_the_key(bad):
    with pytest.raises(SelectorError, match="ood_refit"):
        check_refit(bad)
    assert check_refit(None) is None and check_refit(30) == 30


def test_config_key_builds_a_refitting_selector_and_refuses_small_warmups():
    from causalcache_memory.allocation.registry import build_allocator

    cfg = parse_config({"allocation": {"allocator": "selector", "selector": {"ood_refit": 64}}})
    allocator = build_allocator(cfg.allocation)
    assert allocator.refit is not None and allocator.refit.warmup == 64
    default = build_allocator(parse_config({"allocation": {"allocator": "selector"}}).allocation)
    assert default.refit is not None and default.refit.warmup == 64  # the default since guard try 2
    before = {"ood_refit": None, "ood_refit_warmup": "bundled", "witness_check": False}
    cfg = parse_config({"allocation": {"allocator": "selector", "selector": before}})
    assert build_allocator(cfg.allocation).refit is None
    with pytest.raises(ConfigError, match="ood_refit"):
        parse_config({"allocation": {"allocator": "selector", "selector": {"ood_refit": 5}}})


def test_the_selector_declines_a_strange_team_during_warmup_and_decides_after():
    from causalcache_memory.selector.allocator import SelectorAllocator

    allocator = SelectorAllocator(ood_refit=30, ood_refit_warmup="bundled", share_window=None)  # try 1
    rng = np.random.default_rng(0)
    events = np.clip(rng.random((11, NUM_FEATURES)) * 3.0, 0, 3)  # far from any training screen
    infos = []
    for _ in range(31):
        noisy = events + 0.01 * rng.random(events.shape)
        infos.append(allocator.decide(noisy, t=12, budget=4, witness=None).info)
    assert infos[0]["ood_refit"] == "warmup" and infos[0].get("fallback") == "ood"
    assert infos[-1]["ood_refit"] == "refit" and "fallback" not in infos[-1]
