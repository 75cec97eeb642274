"""The DiD objective, bootstrap intervals and the pre-specified selection gates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from causalcache_lab.hgkv.did import DiDHyper, bootstrap, did_loss, did_stats, passes_gates

# the objective's constants as the paper states them (HGKV objective: m, epsilon, lambda_cap, lambda)
SPEC = DiDHyper(margin=0.01, eps=0.02, lam_cap=2.0, lam=1e-4)


def test_defaults_are_the_spec_values() -> None:
    assert DiDHyper() == SPEC


def test_identity_adapter_pays_three_margins() -> None:
    zero = torch.zeros(4)
    loss = did_loss(zero, zero, zero, [1, 1, 2, 2], torch.tensor(0.0))
    assert loss.item() == pytest.approx(3 * 0.01)


def test_loss_terms_match_the_formula() -> None:
    a_s = torch.tensor([0.05, 0.0])
    a_r = torch.tensor([0.03, -0.05])
    a_n = torch.tensor([0.0, 0.01])
    h = SPEC
    # group 0: [0.01-0.02]+ + [0.01-0.05]+ + [0.01-0.05]+ + 2([0.03-0.02]+ + 0) = 0.02
    # group 1: [0.01-0.05]+ + [0.01-0]+ + [0.01+0.01]+ + 2([0.05-0.02]+ + 0) = 0.01 + 0.02 + 0.06 = 0.09
    same_b = did_loss(a_s, a_r, a_n, [1, 1], torch.tensor(2.0), h)
    assert same_b.item() == pytest.approx((0.02 + 0.09) / 2 + 1e-4 * 2.0)
    # stratified by B: each budget's mean counts once
    strat = did_loss(
        torch.cat([a_s, a_s[1:]]),
        torch.cat([a_r, a_r[1:]]),
        torch.cat([a_n, a_n[1:]]),
        [1, 2, 2],
        torch.tensor(0.0),
        h,
    )
    assert strat.item() == pytest.approx((0.02 + 0.09) / 2)


def test_loss_gradient_prefers_selective_restoration() -> None:
    a_s = torch.zeros(1, requires_grad=True)
    a_r = torch.zeros(1, requires_grad=True)
    did_loss(a_s, a_r, torch.zeros(1), [1], torch.tensor(0.0)).backward()
    assert a_s.grad.item() < 0 < a_r.grad.item()  # descent raises A_s and lowers A_r


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    x = np.random.default_rng(0).normal(0.02, 0.01, size=50)
    a, b = bootstrap(x, seed=3), bootstrap(x, seed=3)
    assert a == b and a.lo < a.mean < a.hi and a.mean == pytest.approx(float(x.mean()))
    assert np.isnan(bootstrap([]).mean)


def _scores(did: float, drift: float, n: int = 40, seed: int = 0):
    rng = np.random.default_rng(seed)
    off = rng.normal(-3.0, 0.5, size=(n, 3))
    inc = np.stack([np.full(n, drift), np.full(n, drift + did), np.full(n, -drift)], axis=1)
    return off + inc + rng.normal(0, 0.002, size=(n, 3)), off


def test_gates() -> None:
    on, off = _scores(did=0.02, drift=0.005)
    stats = did_stats(on, off, [1] * 20 + [2] * 20, reps=300)
    assert set(stats) == {1, 2} and stats[1].groups == 20
    assert stats[1].did_select.mean == pytest.approx(0.02, abs=2e-3)
    assert stats[1].abs_recent.mean == pytest.approx(0.005, abs=2e-3)
    assert passes_gates(stats)
    on, off = _scores(did=0.02, drift=0.03)
    assert not passes_gates(did_stats(on, off, [1] * 40, reps=300))  # drift outside the envelope
    on, off = _scores(did=0.0, drift=0.0)
    assert not passes_gates(did_stats(on, off, [1] * 40, reps=300))  # no selectivity
    assert not passes_gates({})
