"""The history-gated low-rank K/V projection wrapper (one per wrapped ``k_proj``/``v_proj``).

For input ``h`` of shape ``(batch, seq, in_dim)`` the wrapped projection returns (paper, Eq. HGKV; LoRA,
Hu et al. 2022)::

    y = W h + M_hist * (B A h) * alpha / r          # gated (HGKV)
    y = W h +          (B A h) * alpha / r          # ungated control

with ``A: (r, in_dim)`` kaiming-uniform, ``B: (out_dim, r)`` zero at initialisation and ``M_hist`` the
``(batch, seq)`` history-token gate of the current forward pass. Outside the gate the base output is
returned through :func:`torch.where`, so those positions are bitwise the frozen projection; without a
gate (no history image in the batch, or the adapter disabled) ``forward`` returns ``base_layer(h)``
itself.

Without autograd (inference), the gated residual can instead be added in place to the history rows of
``base_layer(h)`` by the fused Triton kernel (:mod:`.kernel`; on CUDA by default when ``triton`` is
importable, ``CAUSALCACHE_HGKV_KERNEL`` selects); the other rows are then never written. The torch path
above stays the reference, the training path and the CPU path.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from causalcache_memory.errors import ImageSpanMismatchError
from causalcache_memory.runtime.hgkv.kernel import (
    PackedLowRank,
    fused_lowrank_update,
    pack_lowrank,
    use_kernel,
)

__all__ = ["GateState", "HistoryGatedLinear"]


def _weight(linears: nn.ModuleDict) -> torch.Tensor:
    """The ``default`` adapter's weight of a peft-style ``ModuleDict`` of ``nn.Linear``."""
    weight = linears["default"].weight
    assert isinstance(weight, torch.Tensor)
    return weight


@dataclass
class GateState:
    """Per-forward state shared by every wrapper of one adapter.

    Attributes:
        mask: ``(batch, seq)`` bool gate while a forward context is active, else None.
        disabled: True inside ``disable_adapter()``: every wrapper returns the base output.
        prefilled: wrappers that already saw the full-width pass of the current context; a later call
            with exactly one position per row is a cached decoding step of a generated token (never a
            history token); any other width raises instead of silently bypassing.
    """

    mask: torch.Tensor | None = None
    disabled: bool = False
    prefilled: set[int] = field(default_factory=set)
    _rows: tuple[torch.Tensor, torch.Tensor] | None = field(default=None, repr=False)

    def flat_rows(self) -> torch.Tensor:
        """Indices of the True entries of ``mask.reshape(-1)`` (computed once per gate, on its device)."""
        mask = self.mask
        if mask is None:
            raise ImageSpanMismatchError("HGKV gate rows requested while no gate is installed")
        if self._rows is None or self._rows[0] is not mask:
            self._rows = (mask, mask.reshape(-1).nonzero().squeeze(1))
        return self._rows[1]


class HistoryGatedLinear(nn.Module):
    """Wraps ``base_layer`` (an ``nn.Linear``) with a rank-``r`` residual, optionally token-gated."""

    def __init__(self, base_layer: nn.Linear, *, r: int, alpha: float, gated: bool, state: GateState) -> None:
        super().__init__()
        if not isinstance(base_layer, nn.Linear):
            raise TypeError(f"HistoryGatedLinear wraps nn.Linear, got {type(base_layer).__name__}")
        self.base_layer = base_layer
        self.r = int(r)
        self.alpha = float(alpha)
        self.scaling = self.alpha / self.r
        self.gated = bool(gated)
        self.merged = False
        self._unmerged: torch.Tensor | None = None
        self._state = state
        self._packed: tuple[tuple[int, ...], PackedLowRank] | None = None
        weight = base_layer.weight
        kw: dict[str, Any] = {"device": weight.device, "dtype": torch.float32}
        self.lora_A = nn.ModuleDict({"default": nn.Linear(base_layer.in_features, self.r, bias=False, **kw)})
        self.lora_B = nn.ModuleDict({"default": nn.Linear(self.r, base_layer.out_features, bias=False, **kw)})
        nn.init.kaiming_uniform_(self.A, a=math.sqrt(5))
        nn.init.zeros_(self.B)

    @property
    def A(self) -> torch.Tensor:
        """``(r, in_features)``, the down projection (peft's ``lora_A["default"].weight``)."""
        return _weight(self.lora_A)

    @property
    def B(self) -> torch.Tensor:
        """``(out_features, r)``, the up projection (peft's ``lora_B["default"].weight``)."""
        return _weight(self.lora_B)

    def delta_weight(self) -> torch.Tensor:
        """``ΔW = B A * alpha / r``, shape ``(out_dim, in_dim)``."""
        return (self.B @ self.A) * self.scaling

    def _delta(self, x: torch.Tensor) -> torch.Tensor:
        """``(..., out_dim)`` residual ``(x A^T) B^T * alpha / r`` computed in float32."""
        return self.lora_B["default"](self.lora_A["default"](x.to(self.A.dtype))) * self.scaling

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x``: ``(batch, seq, in_dim)`` -> ``(batch, seq, out_dim)``."""
        result = self.base_layer(x)
        state = self._state
        if state.disabled or self.merged:
            return result
        if not self.gated:
            return result + self._delta(x).to(result.dtype)
        mask = state.mask
        if mask is None:
            return result  # no history image is active: exactly the frozen module
        if tuple(x.shape[:-1]) != tuple(mask.shape):
            if id(self) in state.prefilled and x.shape[0] == mask.shape[0] and x.shape[1] == 1:
                # a cached decoding step: one generated token per row, never a history token (an image
                # needs at least its framing tokens). A narrower multi-token forward is not decoding.
                return result
            raise ImageSpanMismatchError(
                f"HGKV gate has shape {tuple(mask.shape)} but the projection input is {tuple(x.shape)}; "
                "the forward pass does not run over the batch the gate was built for"
            )
        state.prefilled.add(id(self))
        if self._kernel_applies(x, result):
            self._kernel_update(x, result)
            return result
        gated = result + self._delta(x).to(result.dtype)
        return torch.where(mask.to(result.device).unsqueeze(-1), gated, result)

    def _kernel_applies(self, x: torch.Tensor, result: torch.Tensor) -> bool:
        """The fused kernel may replace the torch path: selected for this device, no autograd, plain layout."""
        if torch.is_grad_enabled() and (x.requires_grad or self.A.requires_grad or self.B.requires_grad):
            return False  # training: the torch path carries the gradients
        return result.is_contiguous() and use_kernel(result.device)

    def _kernel_update(self, x: torch.Tensor, result: torch.Tensor) -> None:
        """Add the residual in place to ``result``'s history rows (one fused update, :func:`fused_lowrank_update`)."""
        key = (self.A.data_ptr(), self.A._version, self.B.data_ptr(), self.B._version)
        if self._packed is None or self._packed[0] != key:
            packed = pack_lowrank([(self.A, self.B)], col0=0, scaling=self.scaling)
            self._packed = (key, packed)
        rows = self._state.flat_rows().to(result.device)
        with torch.no_grad():
            fused_lowrank_update(
                x.reshape(-1, x.shape[-1]), result.view(-1, result.shape[-1]), rows, self._packed[1]
            )

    @torch.no_grad()
    def merge(self) -> None:
        """Fold ``ΔW`` into ``base_layer.weight`` (only for the ungated control; see the adapter)."""
        if self.gated:
            raise RuntimeError("a gated HGKV projection cannot be merged")
        if not self.merged:
            self._unmerged = self.base_layer.weight.detach().clone()
            self.base_layer.weight += self.delta_weight().to(self.base_layer.weight.dtype)
            self.merged = True

    @torch.no_grad()
    def unmerge(self) -> None:
        """Restore the exact pre-merge base weight."""
        if self.merged and self._unmerged is not None:
            self.base_layer.weight.copy_(self._unmerged)
            self._unmerged = None
            self.merged = False

    def extra_repr(self) -> str:
        return f"r={self.r}, alpha={self.alpha:g}, gated={self.gated}"
