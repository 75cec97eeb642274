"""``HistoryGatedLinear`` on its own: the Eq. HGKV arithmetic, the gate's fail-closed shape rules, merging.

These tests wrap a small ``nn.Linear`` directly (no Qwen model), with random non-zero ``B`` so that a
zero-initialised adapter cannot make them pass, and recompute every expected output independently from
the layer's weights: ``y = W h + b + M_hist * (h A^T B^T) * alpha / r``.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from causalcache_memory.errors import ImageSpanMismatchError
from causalcache_memory.runtime.hgkv.layer import GateState, HistoryGatedLinear

IN, OUT = 6, 5


def _layer(
    *, gated: bool, r: int = 2, alpha: float = 3.0, state: GateState | None = None
) -> HistoryGatedLinear:
    """A wrapper with random non-zero ``A``, ``B`` and base weights (alpha / r = 1.5 by default)."""
    gen = torch.Generator().manual_seed(7)
    base = nn.Linear(IN, OUT)
    layer = HistoryGatedLinear(base, r=r, alpha=alpha, gated=gated, state=state or GateState())
    with torch.no_grad():
        for p in layer.parameters():
            p.copy_(torch.randn(p.shape, generator=gen))
    return layer


def _expected_delta(layer: HistoryGatedLinear, x: torch.Tensor, scaling: float) -> torch.Tensor:
    """``(x A^T) B^T * scaling`` written out with einsum, independent of the layer's own code."""
    a = layer.lora_A["default"].weight.detach()
    b = layer.lora_B["default"].weight.detach()
    return torch.einsum("bsi,ri,or->bso", x, a, b) * scaling


def _frozen(layer: HistoryGatedLinear, x: torch.Tensor) -> torch.Tensor:
    w = layer.base_layer.weight.detach()
    return torch.einsum("bsi,oi->bso", x, w) + layer.base_layer.bias.detach()


def test_options_are_keyword_only() -> None:
    """``r``, ``alpha``, ``gated`` and ``state`` are keyword-only: ``(base, 2, 4.0, ...)`` is ambiguous."""
    with pytest.raises(TypeError):
        HistoryGatedLinear(nn.Linear(IN, OUT), 2, 3.0, True, GateState())  # type: ignore[misc]


def test_delta_weight_is_b_a_times_alpha_over_r_with_a_fractional_scale() -> None:
    """``ΔW = B A * alpha / r`` (LoRA scaling): alpha = 3, r = 2 must scale by 1.5, not ``3 // 2`` = 1."""
    layer = _layer(gated=False, r=2, alpha=3.0)
    assert layer.scaling == 1.5
    a, b = layer.A.detach(), layer.B.detach()
    expected = torch.einsum("ok,ki->oi", b, a)
    torch.testing.assert_close(layer.delta_weight().detach(), expected * 1.5)


def test_ungated_control_adds_the_scaled_residual_on_every_token() -> None:
    """The ungated control is ``y = W h + (B A h) * alpha / r`` at every position (Eq. HGKV without M)."""
    layer = _layer(gated=False)
    x = torch.randn(2, 4, IN, generator=torch.Generator().manual_seed(3))
    expected = _frozen(layer, x) + _expected_delta(layer, x, 1.5)
    torch.testing.assert_close(layer(x).detach(), expected)


def test_gated_forward_adds_the_residual_only_under_the_gate() -> None:
    """Gated positions get ``W h + ΔW h``; every other position is bitwise the frozen projection."""
    state = GateState()
    layer = _layer(gated=True, state=state)
    x = torch.randn(2, 5, IN, generator=torch.Generator().manual_seed(4))
    mask = torch.zeros(2, 5, dtype=torch.bool)
    mask[0, 1:3] = True
    mask[1, 4] = True
    state.mask = mask
    out = layer(x).detach()
    base = layer.base_layer(x).detach()
    expected = _frozen(layer, x) + _expected_delta(layer, x, 1.5)
    torch.testing.assert_close(out[mask], expected[mask])
    assert torch.equal(out[~mask], base[~mask])
    assert not torch.allclose(out[mask], base[mask])  # the residual is really there


def _prefilled(batch: int = 2, seq: int = 10) -> tuple[HistoryGatedLinear, GateState]:
    state = GateState()
    layer = _layer(gated=True, state=state)
    state.mask = torch.zeros(batch, seq, dtype=torch.bool)
    state.mask[:, 3:5] = True
    layer(torch.randn(batch, seq, IN))  # the full-width pass of the context
    return layer, state


def test_decoding_steps_bypass_only_with_one_token_per_row_of_the_same_batch() -> None:
    """After the prefill, a ``(batch, 1)`` call is a cached decoding step: exact base output, whatever
    the batch size (compared by value: a 300-row step is recognised like a 2-row one)."""
    for rows in (2, 300):
        layer, _ = _prefilled(batch=rows)
        step = torch.randn(rows, 1, IN)
        assert torch.equal(layer(step), layer.base_layer(step))


@pytest.mark.parametrize(
    ("shape", "why"),
    [
        ((1, 1), "fewer rows than the gate: another batch"),
        ((3, 1), "more rows than the gate: another batch"),
        ((2, 0), "an empty forward is not a decoding step"),
        ((2, 6), "a narrower multi-token forward"),
        ((2, 12), "a wider forward"),
        ((3, 10), "more rows of the gate's width: the gate would be broadcast"),
    ],
)
def test_any_other_shape_after_the_prefill_raises(shape, why) -> None:
    """GateState: "any other width raises instead of silently bypassing" (or silently mis-gating)."""
    layer, _ = _prefilled(batch=2, seq=10)
    with pytest.raises(ImageSpanMismatchError, match="does not run over the batch"):
        layer(torch.randn(*shape, IN))


def test_a_one_token_call_before_the_prefill_raises() -> None:
    """Only a wrapper that saw the full-width pass may treat a one-token call as decoding."""
    state = GateState()
    layer = _layer(gated=True, state=state)
    state.mask = torch.ones(2, 10, dtype=torch.bool)
    with pytest.raises(ImageSpanMismatchError, match="gate has shape"):
        layer(torch.randn(2, 1, IN))


def test_merge_folds_delta_once_and_unmerge_restores_the_exact_weight() -> None:
    """The merged control computes the same as the unmerged one (not twice the residual), merging
    twice is a no-op, and ``unmerge`` restores the pre-merge weight bitwise."""
    layer = _layer(gated=False)
    x = torch.randn(1, 3, IN, generator=torch.Generator().manual_seed(5))
    before = layer.base_layer.weight.detach().clone()
    unmerged_out = layer(x).detach()
    layer.merge()
    assert layer.merged
    torch.testing.assert_close(layer.base_layer.weight.detach(), before + layer.delta_weight().detach())
    layer.merge()
    torch.testing.assert_close(layer.base_layer.weight.detach(), before + layer.delta_weight().detach())
    torch.testing.assert_close(layer(x).detach(), unmerged_out)
    assert layer.base_layer.weight.grad_fn is None  # merging is not part of any autograd graph
    layer.unmerge()
    assert not layer.merged and torch.equal(layer.base_layer.weight.detach(), before)
    torch.testing.assert_close(layer(x).detach(), unmerged_out)


def test_initialisation_is_lora_s_kaiming_uniform_a_and_zero_b() -> None:
    """LoRA/peft init: ``A ~ U(-1/sqrt(in_dim), 1/sqrt(in_dim))`` (kaiming-uniform with a = sqrt(5)),
    ``B = 0``; so a fresh adapter is exactly the frozen projection and ``A`` has the standard scale."""
    layer = HistoryGatedLinear(nn.Linear(64, 8), r=64, alpha=16.0, gated=False, state=GateState())
    bound = 1 / math.sqrt(64)
    a = layer.A.detach().abs()
    assert a.dtype == torch.float32
    assert float(a.max()) <= bound  # 4 096 draws: the range is reached, but never exceeded
    assert float(a.max()) >= 0.99 * bound
    assert not layer.B.detach().any()
    x = torch.randn(1, 3, 64)
    assert torch.equal(layer(x), layer.base_layer(x))


def test_a_gated_projection_cannot_be_merged() -> None:
    """Folding ``ΔW`` into the weight would apply it to every token: only the ungated control merges."""
    layer = _layer(gated=True)
    before = layer.base_layer.weight.detach().clone()
    with pytest.raises(RuntimeError, match="cannot be merged"):
        layer.merge()
    assert not layer.merged and torch.equal(layer.base_layer.weight.detach(), before)
