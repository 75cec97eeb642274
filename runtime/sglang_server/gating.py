"""The history gate and the K/V update inside SGLang's forward pass, in plain torch (no ``sglang`` import).

For each adapted layer ``l`` and each token ``i`` of an *extend* (prefill) pass that belongs to an image the
request flagged ``history`` (paper, "Policy-Preserving History-Gated KV Adapter"; same math as
:class:`~causalcache_memory.runtime.hgkv.layer.HistoryGatedLinear`)::

    K_l[i] = W_K h_i + (B_K (A_K h_i)) * alpha / r          # float32 residual, cast to the K dtype
    V_l[i] = W_V h_i + (B_V (A_V h_i)) * alpha / r

``W_K h`` and ``W_V h`` are the K and V column slices ``[q_size, q_size + kv_size)`` and
``[q_size + kv_size, q_size + 2 kv_size)`` of the fused ``qkv_proj`` output. A forward hook on every
adapted ``qkv_proj`` edits those rows in place; every other row, every decode step and every batch without
a history image is left untouched and the hook does no tensor work at all, so the output is bitwise the
base model's and CUDA-graph decode captures nothing extra.

Rows are found from SGLang's own bookkeeping (:func:`history_rows`): each request's
``MultimodalDataItem.offsets`` (absolute, inclusive token spans) intersected with the request's extend
window ``[prefix_len, prefix_len + extend_len)``, so chunked prefill and a radix hit that ends inside an
image gate exactly the image tokens computed in this pass. Fail-closed: the ids at those rows must be the
history image's radix sentinels (checked on the device, one synchronisation per history prefill; disable
with ``CAUSALCACHE_HGKV_VERIFY=0``).

The update itself is one fused Triton update (two launches: split-K projection, then the K/V tiles) per
adapted layer for K and V together
(:func:`~causalcache_memory.runtime.hgkv.kernel.fused_lowrank_update`) on CUDA when ``triton`` is
importable, and the torch reference (:meth:`ServerHGKV.update_reference`) otherwise; ``CAUSALCACHE_HGKV_KERNEL``
(``auto``/``triton``/``torch``) overrides the choice.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from causalcache_memory.errors import ConfigError, ImageSpanMismatchError
from causalcache_memory.runtime.hgkv.kernel import (
    PackedLowRank,
    fused_lowrank_update,
    kernel_choice,
    pack_lowrank,
    use_kernel,
)
from causalcache_memory.runtime.sglang_server.adapter import ServerAdapterWeights
from causalcache_memory.runtime.sglang_server.roles import DEFAULT_MASK, DEFAULT_SHIFT, history_items

__all__ = ["HistoryRows", "ServerHGKV", "history_rows", "kv_delta"]


@dataclass(frozen=True)
class HistoryRows:
    """Rows of the flattened extend batch that hold history-image tokens, and the ids they must carry."""

    rows: list[int]
    expected_ids: list[int]


def _extend_lengths(forward_batch: Any, n: int) -> tuple[list[int], list[int]]:
    prefix = forward_batch.extend_prefix_lens_cpu
    seq = forward_batch.extend_seq_lens_cpu
    if prefix is None or seq is None:  # SGLang's gpu-only path leaves the host copies unset
        if forward_batch.extend_prefix_lens is None or forward_batch.extend_seq_lens is None:
            raise ImageSpanMismatchError("HGKV gate: the extend batch has no prefix/sequence lengths")
        prefix = forward_batch.extend_prefix_lens.tolist()
        seq = forward_batch.extend_seq_lens.tolist()
    if len(prefix) != n or len(seq) != n:
        raise ImageSpanMismatchError(
            f"HGKV gate: {n} requests but {len(prefix)} prefix and {len(seq)} extend lengths"
        )
    return [int(p) for p in prefix], [int(s) for s in seq]


def history_rows(
    forward_batch: Any, num_tokens: int, *, shift: int = DEFAULT_SHIFT, mask: int = DEFAULT_MASK
) -> HistoryRows | None:
    """The history rows of this forward pass, or None when nothing is to be computed.

    None for decode, idle and speculative-verify passes and for extend passes without a history image
    in the tokens being computed. Reads ``forward_mode``, ``mm_inputs``, ``extend_prefix_lens_cpu`` and
    ``extend_seq_lens_cpu`` of SGLang's ``ForwardBatch`` (call it before the model's forward, which
    clears ``mm_inputs``).
    """
    mode = forward_batch.forward_mode
    if mode is None or not mode.is_extend() or mode.is_target_verify():
        return None
    mm_inputs = forward_batch.mm_inputs
    if not mm_inputs:
        return None
    per_request = [history_items(mm.mm_items, shift=shift, mask=mask) if mm else [] for mm in mm_inputs]
    if not any(per_request):
        return None
    prefix, seq = _extend_lengths(forward_batch, len(mm_inputs))
    if sum(seq) != num_tokens:
        raise ImageSpanMismatchError(
            f"HGKV gate: the extend lengths sum to {sum(seq)} but the pass has {num_tokens} tokens"
        )
    rows: list[int] = []
    expected: list[int] = []
    base = 0
    for items, p, n in zip(per_request, prefix, seq, strict=True):
        for item in items:
            values = tuple(item.padding_values())
            for start, end in item.offsets:
                lo, hi = max(int(start), p), min(int(end) + 1, p + n)
                rows.extend(range(base + lo - p, base + hi - p))
                expected.extend(values[(pos - int(start)) % len(values)] for pos in range(lo, hi))
        base += n
    if not rows:
        return None  # the history images of these requests are all in the cached prefix
    return HistoryRows(rows, expected)


def kv_delta(x: torch.Tensor, a: torch.Tensor, b: torch.Tensor, scaling: float) -> torch.Tensor:
    """``(B (A x)) * scaling`` in float32 for ``x: (n, hidden)``, ``a: (r, hidden)``, ``b: (out, r)``."""
    return F.linear(F.linear(x.to(a.dtype), a), b) * scaling


class ServerHGKV:
    """The adapter inside a served model: weights on the device, hooks on the adapted ``qkv_proj``.

    Args:
        weights: :func:`~.adapter.load_server_adapter` output.
        q_size, kv_size: column layout of the fused ``qkv_proj`` output.
        verify: check the ids at gated rows (default: env ``CAUSALCACHE_HGKV_VERIFY`` != ``0``).
        kernel: ``auto``/``triton``/``torch`` (default: env ``CAUSALCACHE_HGKV_KERNEL``, else ``auto``).
    """

    def __init__(
        self,
        weights: ServerAdapterWeights,
        *,
        q_size: int,
        kv_size: int,
        verify: bool | None = None,
        kernel: str | None = None,
    ) -> None:
        self.weights = weights
        self.q_size = int(q_size)
        self.kv_size = int(kv_size)
        self.scaling = weights.scaling
        self.verify = os.environ.get("CAUSALCACHE_HGKV_VERIFY", "1") != "0" if verify is None else verify
        self.kernel = kernel_choice(kernel)
        self.rows: torch.Tensor | None = None
        self._params: dict[int, tuple[torch.Tensor | None, ...]] = {}
        self._packed: dict[int, PackedLowRank] = {}
        self._handles: list[Any] = []

    # ------------------------------------------------------------------ installation
    def install(self, decoder_layers: Sequence[Any], *, device: Any = None) -> None:
        """Move the weights to ``device`` and hook ``decoder_layers[i].self_attn.qkv_proj`` of adapted layers."""
        if self._handles:
            raise ConfigError("the HGKV server adapter is already installed")
        for i, tensors in sorted(self.weights.layers.items()):
            if i >= len(decoder_layers):
                raise ConfigError(f"adapter layer {i} does not exist ({len(decoder_layers)} layers)")
            self._params[i] = tuple(None if t is None else t.to(device) for t in tensors)
            module = decoder_layers[i].self_attn.qkv_proj
            self._handles.append(module.register_forward_hook(self._hook_for(i)))

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    @property
    def layers(self) -> tuple[int, ...]:
        return tuple(sorted(self.weights.layers))

    # ------------------------------------------------------------------ per forward
    @contextlib.contextmanager
    def active(self, plan: HistoryRows | None, input_ids: torch.Tensor) -> Iterator[None]:
        """Hold the gate of ``plan`` for one forward pass (a no-op for None)."""
        if plan is None:
            yield
            return
        if self.rows is not None:
            raise ConfigError("HGKV forward passes cannot be nested")
        device = input_ids.device
        rows = torch.tensor(plan.rows, dtype=torch.long).to(device, non_blocking=True)
        if self.verify:
            want = torch.tensor(plan.expected_ids, dtype=input_ids.dtype).to(device, non_blocking=True)
            if not torch.equal(input_ids.index_select(0, rows), want):
                raise ImageSpanMismatchError(
                    "HGKV gate: the tokens at the rows of the history images are not those images' radix "
                    "sentinels; the SGLang batch layout differs from what this plugin was written for "
                    "(check the pinned sglang version)"
                )
        self.rows = rows
        try:
            yield
        finally:
            self.rows = None

    def _hook_for(self, layer: int) -> Any:
        def hook(module: Any, args: tuple[Any, ...], output: Any) -> None:
            rows = self.rows
            if rows is None:
                return None  # decode or no history image: no tensor work, bitwise the base output
            qkv = output[0] if isinstance(output, tuple) else output
            self.update(layer, args[0], qkv, rows)
            return None

        return hook

    @torch.no_grad()
    def update(self, layer: int, x: torch.Tensor, qkv: torch.Tensor, rows: torch.Tensor) -> None:
        """Add the gated residuals to the K/V slices of ``qkv`` (``(tokens, q + 2 kv)``) at ``rows``, in place.

        One fused kernel launch for K and V when :func:`~causalcache_memory.runtime.hgkv.kernel.use_kernel`
        selects it for ``qkv``'s device, else :meth:`update_reference`.
        """
        if not isinstance(x, torch.Tensor) or x.dim() != 2 or qkv.dim() != 2 or x.shape[0] != qkv.shape[0]:
            raise ImageSpanMismatchError(
                f"HGKV update: qkv_proj input {getattr(x, 'shape', type(x))} and output {tuple(qkv.shape)} "
                "are not (tokens, width) with equal token counts"
            )
        if use_kernel(qkv.device, self.kernel):
            fused_lowrank_update(x, qkv, rows, self.packed(layer))
        else:
            self.update_reference(layer, x, qkv, rows)

    def packed(self, layer: int) -> PackedLowRank:
        """Layer ``layer``'s adapted K and/or V weights stacked for the kernel (built once, on their device)."""
        if layer not in self._packed:
            a_k, b_k, a_v, b_v = self._params[layer]
            pairs = [(a, b) for a, b in ((a_k, b_k), (a_v, b_v)) if a is not None and b is not None]
            col0 = self.q_size if a_k is not None else self.q_size + self.kv_size
            self._packed[layer] = pack_lowrank(pairs, col0=col0, scaling=self.scaling)
        return self._packed[layer]

    @torch.no_grad()
    def update_reference(self, layer: int, x: torch.Tensor, qkv: torch.Tensor, rows: torch.Tensor) -> None:
        """The torch reference of :meth:`update` (also the CPU path): gather, two ``F.linear``, ``index_add_``."""
        a_k, b_k, a_v, b_v = self._params[layer]
        x_h = x.index_select(0, rows)
        q, kv = self.q_size, self.kv_size
        # rows are distinct, so index_add_ is one rounding of (base + residual.to(dtype)) per element,
        # exactly the transformers adapter's ``result + delta.to(result.dtype)``
        if a_k is not None and b_k is not None:
            qkv[:, q : q + kv].index_add_(0, rows, kv_delta(x_h, a_k, b_k, self.scaling).to(qkv.dtype))
        if a_v is not None and b_v is not None:
            qkv[:, q + kv : q + 2 * kv].index_add_(
                0, rows, kv_delta(x_h, a_v, b_v, self.scaling).to(qkv.dtype)
            )
