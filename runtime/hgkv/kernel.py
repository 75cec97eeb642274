"""The fused gated K/V update: choosing it, packing the weights, launching it (Triton, optional).

For rows ``i`` of a flattened batch (history-image tokens) and one or more adapted projections ``p``
whose outputs are adjacent column slices of ``out`` (K then V of SGLang's fused ``qkv_proj`` output;
a single ``k_proj`` or ``v_proj`` output in the transformers adapter)::

    out[i, slice_p] = cast( out[i, slice_p] + (B_p (A_p x_i)) * alpha / r )        # float32 residual

one kernel launch reads the rows of ``x`` once and writes only those rows' ``slice_p`` columns, in place.
The residual is computed in float32 and added to the float32 value of ``out`` with **one** rounding to
``out``'s dtype; the torch reference (``out + residual.to(dtype)``) rounds twice, so in bfloat16 the two
differ by at most one unit in the last place of the result (docs/HGKV.md, "The fused kernel").

Selection (``CAUSALCACHE_HGKV_KERNEL``, or the ``choice`` argument): ``auto`` (default) uses the kernel
for CUDA tensors when ``triton`` is importable and the torch path otherwise; ``triton`` always uses it
(CPU tensors then need Triton's interpreter, ``TRITON_INTERPRET=1``); ``torch`` never does.
"""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from causalcache_memory.errors import ConfigError

__all__ = [
    "KERNEL_ENV",
    "PackedLowRank",
    "fused_lowrank_update",
    "kernel_choice",
    "pack_lowrank",
    "triton_available",
    "use_kernel",
]

KERNEL_ENV = "CAUSALCACHE_HGKV_KERNEL"
CHOICES = ("auto", "triton", "torch")
logger = logging.getLogger("causalcache_memory.hgkv.kernel")

_jitted: dict[bool, Any] = {}
_precision_ok: dict[tuple[str, str], str] = {}


@functools.cache
def triton_available() -> bool:
    """True when ``triton`` can be imported (``pip install triton``; CUDA torch wheels ship it)."""
    return importlib.util.find_spec("triton") is not None


def kernel_choice(choice: str | None = None) -> str:
    """``choice`` or ``$CAUSALCACHE_HGKV_KERNEL`` (default ``auto``), validated."""
    value = (choice if choice is not None else os.environ.get(KERNEL_ENV, "auto")).strip().lower() or "auto"
    if value not in CHOICES:
        raise ConfigError(
            f"{KERNEL_ENV}={value!r} is not one of {', '.join(CHOICES)}; unset it for the default 'auto' "
            "(the Triton kernel on CUDA when triton is importable, the torch path otherwise)"
        )
    return value


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").strip().lower() in ("1", "true", "on", "yes")


def use_kernel(device: torch.device, choice: str | None = None) -> bool:
    """Whether the fused kernel runs for tensors on ``device`` under ``choice`` (see module docstring)."""
    value = kernel_choice(choice)
    if value == "torch":
        return False
    if value == "auto":
        return device.type == "cuda" and triton_available()
    if not triton_available():
        raise ConfigError(
            f"{KERNEL_ENV}=triton but triton is not installed; `pip install triton` (CUDA torch wheels "
            "ship it) or set it to 'auto'/'torch'"
        )
    if device.type != "cuda" and not _interpreting():
        raise ConfigError(
            f"{KERNEL_ENV}=triton on {device.type} tensors needs Triton's interpreter: set TRITON_INTERPRET=1 "
            "(tests only), or use 'auto' for the torch path off CUDA"
        )
    return True


@dataclass(frozen=True)
class PackedLowRank:
    """The adapted projections of one layer, stacked for one launch.

    Attributes:
        a: ``(R2, hidden)`` float32, the ``A_p`` stacked along rows, zero-padded to ``R2`` (a power of two
            >= 16, the smallest ``tl.dot`` dimension).
        b: ``(n_out, R2)`` float32, block-diagonal: ``B_p`` in the rows of projection ``p``'s output slice and
            the columns of its ``A_p`` rows.
        col0: first output column written (the start of the first projection's slice).
        scaling: ``alpha / r``.
    """

    a: torch.Tensor
    b: torch.Tensor
    col0: int
    scaling: float

    @property
    def n_out(self) -> int:
        return int(self.b.shape[0])


def pack_lowrank(
    pairs: Sequence[tuple[torch.Tensor, torch.Tensor]], *, col0: int, scaling: float
) -> PackedLowRank:
    """Stack ``(A_p (r_p, hidden), B_p (out_p, r_p))`` pairs whose output slices are adjacent from ``col0``."""
    if not pairs:
        raise ValueError("pack_lowrank needs at least one (A, B) pair")
    hidden = int(pairs[0][0].shape[1])
    ranks = [int(a.shape[0]) for a, _ in pairs]
    r2 = max(16, 1 << (sum(ranks) - 1).bit_length())
    n_out = sum(int(b.shape[0]) for _, b in pairs)
    device = pairs[0][0].device
    a_all = torch.zeros(r2, hidden, dtype=torch.float32, device=device)
    b_all = torch.zeros(n_out, r2, dtype=torch.float32, device=device)
    r0 = n0 = 0
    for (a, b), r in zip(pairs, ranks, strict=True):
        if tuple(a.shape) != (r, hidden) or int(b.shape[1]) != r:
            raise ValueError(
                f"pack_lowrank: A {tuple(a.shape)} and B {tuple(b.shape)} are not (r, {hidden}), (out, r)"
            )
        a_all[r0 : r0 + r] = a.detach().float()
        b_all[n0 : n0 + b.shape[0], r0 : r0 + r] = b.detach().float()
        r0, n0 = r0 + r, n0 + int(b.shape[0])
    return PackedLowRank(a_all.contiguous(), b_all.contiguous(), int(col0), float(scaling))


def _kernel() -> Any:
    interpret = _interpreting()
    if interpret not in _jitted:
        import triton

        from causalcache_memory.runtime.hgkv._kv_kernel import gated_lowrank_update

        _jitted[interpret] = triton.jit(gated_lowrank_update)
    return _jitted[interpret]


def default_blocks(n_rows: int) -> tuple[int, int, int, int]:
    """``(BLOCK_M, BLOCK_K, BLOCK_N, num_warps)`` for ``n_rows`` gathered rows."""
    return (16 if n_rows <= 4096 else 32), 128, 64, 4


def fused_lowrank_update(
    x: torch.Tensor,
    out: torch.Tensor,
    rows: torch.Tensor,
    packed: PackedLowRank,
    *,
    precision: str | None = None,
    blocks: tuple[int, int, int, int] | None = None,
) -> None:
    """``out[rows, col0:col0+n_out] += (x[rows] A^T) B^T * scaling`` in float32, one rounding, in place.

    Args:
        x: ``(tokens, hidden)`` input of the projection(s).
        out: ``(tokens, width)`` their output; only ``rows`` x ``[col0, col0 + n_out)`` is written.
        rows: ``(n,)`` distinct int row indices on ``out``'s device.
        packed: :func:`pack_lowrank` output on ``out``'s device.
        precision: ``tl.dot`` input precision for the float32 products (default ``tf32x3`` on CUDA,
            about float32 accuracy on tensor cores; ``ieee`` is exact float32 FMA).
        blocks: ``(BLOCK_M, BLOCK_K, BLOCK_N, num_warps)``; default :func:`default_blocks`.
    """
    n = int(rows.numel())
    if n == 0:
        return
    if x.dim() != 2 or out.dim() != 2 or x.shape[0] != out.shape[0] or x.shape[1] != packed.a.shape[1]:
        raise ValueError(f"fused_lowrank_update: x {tuple(x.shape)} and out {tuple(out.shape)} do not match")
    if packed.col0 + packed.n_out > out.shape[1]:
        raise ValueError(f"fused_lowrank_update: columns {packed.col0}+{packed.n_out} exceed {out.shape[1]}")
    if out.device.type == "cpu" and not _interpreting():
        raise ValueError(
            "fused_lowrank_update on CPU tensors needs TRITON_INTERPRET=1 (Triton's interpreter)"
        )
    block_m, block_k, block_n, warps = blocks or default_blocks(n)
    grid = ((n + block_m - 1) // block_m,)
    kernel = _kernel()
    want = precision or ("tf32x3" if out.device.type == "cuda" else "ieee")
    key = (str(out.device), want)
    use = _precision_ok.get(key, want)
    args = (x, out, rows, packed.a, packed.b, n, x.shape[1], packed.n_out, packed.col0, packed.scaling)
    strides = (x.stride(0), x.stride(1), out.stride(0), out.stride(1))
    consts = {
        "R2": int(packed.a.shape[0]),
        "BLOCK_M": block_m,
        "BLOCK_K": block_k,
        "BLOCK_N": block_n,
        "OUT_BF16": out.dtype == torch.bfloat16,
    }
    try:
        kernel[grid](*args, *strides, **consts, PRECISION=use, num_warps=warps)
    except Exception as exc:
        if use == "ieee" or key in _precision_ok:
            raise
        # an older Triton or another backend without this dot precision: exact float32 instead
        logger.warning("HGKV kernel: input_precision=%s failed (%s); using ieee", use, exc)
        _precision_ok[key] = "ieee"
        kernel[grid](*args, *strides, **consts, PRECISION="ieee", num_warps=warps)
        return
    _precision_ok[key] = use
