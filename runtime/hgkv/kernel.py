"""The fused gated K/V update: choosing it, packing the weights, launching it (Triton, optional).

For rows ``i`` of a flattened batch (history-image tokens) and one or more adapted projections ``p``
whose outputs are adjacent column slices of ``out`` (K then V of SGLang's fused ``qkv_proj`` output;
a single ``k_proj`` or ``v_proj`` output in the transformers adapter)::

    out[i, slice_p] = cast( out[i, slice_p] + (B_p (A_p x_i)) * alpha / r )        # float32 residual

one update (two launches, :mod:`._kv_kernel`: a split-K projection onto the packed rank, then the output tiles)
reads the rows of ``x`` once and writes only those rows' ``slice_p`` columns, in place; the launch plan is
:func:`default_plan` (rows, hidden, SM count).
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
    "Plan",
    "default_plan",
    "error_bound",
    "fused_lowrank_update",
    "kernel_choice",
    "pack_lowrank",
    "triton_available",
    "use_kernel",
]

KERNEL_ENV = "CAUSALCACHE_HGKV_KERNEL"
CHOICES = ("auto", "triton", "torch")
logger = logging.getLogger("causalcache_memory.hgkv.kernel")

_jitted: dict[bool, dict[str, Any]] = {}
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
        a3: ``(3, R2, hidden)`` bfloat16, ``a`` split exactly: ``a == a3[0] + a3[1] + a3[2]`` in float32
            (each part the bf16 rounding of what the previous ones leave; 3 x 8 significand bits = 24).
    """

    a: torch.Tensor
    b: torch.Tensor
    col0: int
    scaling: float
    a3: torch.Tensor

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
    parts, rest = [], a_all
    for _ in range(3):
        parts.append(rest.to(torch.bfloat16))
        rest = rest - parts[-1].float()  # exact in float32
    if bool(rest.any()):  # only for float32 subnormals below bf16's range
        logger.warning("pack_lowrank: A is not exactly three bfloat16 parts (subnormal entries)")
    a3 = torch.stack(parts).contiguous()
    return PackedLowRank(a_all.contiguous(), b_all.contiguous(), int(col0), float(scaling), a3)


_BODIES = ("lowrank_project", "lowrank_apply")


def _kernels() -> dict[str, Any]:
    interpret = _interpreting()
    if interpret not in _jitted:
        import triton

        from causalcache_memory.runtime.hgkv import _kv_kernel

        _jitted[interpret] = {name: triton.jit(getattr(_kv_kernel, name)) for name in _BODIES}
    return _jitted[interpret]


@dataclass(frozen=True)
class Plan:
    """How one update is launched (results agree across plans up to float32 summation order).

    Attributes:
        block_m: gathered rows per program (16, 32 or 64: ``tl.dot`` needs >= 16).
        block_k: hidden-dim tile of stage 1.
        split: K-splits of stage 1 (programs = row blocks x split), at least 1.
        warps, stages: ``num_warps`` / ``num_stages`` of stage 1.
        block_n: output-column tile (stage 2).
        apply_m: rows per stage-2 program.
    """

    block_m: int
    block_k: int
    split: int
    warps: int = 4
    stages: int = 3
    block_n: int = 128
    apply_m: int = 32

    def __post_init__(self) -> None:
        if self.split < 1:
            raise ValueError(
                f"Plan(split={self.split}): the update runs split-K in two stages; use split >= 1"
            )

    @property
    def key(self) -> str:
        return (
            f"m{self.block_m}_k{self.block_k}_s{self.split}_w{self.warps}_st{self.stages}"
            f"_apply{self.apply_m}x{self.block_n}"
        )


@functools.cache
def _sm_count(device: torch.device) -> int:
    if device.type == "cuda":
        return int(torch.cuda.get_device_properties(device).multi_processor_count)
    return 4  # the interpreter runs programs one by one; any small number exercises the split logic


def default_plan(n_rows: int, hidden: int, sm_count: int) -> Plan:
    """The launch plan for ``n_rows`` gathered rows of a ``hidden``-wide input on ``sm_count`` SMs.

    The update moves ``n_rows x hidden`` input elements (the bulk) and reads/writes ``n_rows x n_out``
    output elements, with ~nothing to compute (rank 16), so it is bound by memory latency x parallelism.
    ``block_m`` is 64 rows (one Hopper warp-group MMA tile; every row block streams all of ``A`` from L2,
    ``R2 x hidden x 4`` bytes, so taller blocks halve that traffic) once there are >= 256 rows, else 32, or
    16 under 32 rows (``tl.dot``'s minimum); ``block_k`` 64. Parallelism then comes from splitting the
    hidden dim: ``split`` is the smallest number giving ``>= 2 x sm_count`` stage-1 programs (one wave of
    about two resident programs per SM, each with its 3-stage pipeline of ~12 KB tiles in flight: ~70 KB
    per SM, above the ~25 KB that 3 TB/s x ~1 µs latency needs across 132 SMs), capped so that every
    program keeps >= 4 ``block_k`` tiles. More splits only add partial sums (``split x n_rows x 64`` bytes,
    re-read by every column tile of stage 2). Stage 2 tiles ``32 x 128`` (rows x output columns) are
    independent and already numerous.
    """
    if n_rows >= 256:
        block_m = 64
    elif n_rows >= 32:
        block_m = 32
    else:
        block_m = 16
    block_k = 64
    row_blocks = -(-n_rows // block_m)
    tiles = -(-hidden // block_k)
    split = max(1, min(-(-2 * sm_count // row_blocks), tiles // 4))
    per_split = -(-tiles // split)
    split = -(-tiles // per_split)  # no empty split
    return Plan(block_m, block_k, split)


def fused_lowrank_update(
    x: torch.Tensor,
    out: torch.Tensor,
    rows: torch.Tensor,
    packed: PackedLowRank,
    *,
    precision: str | None = None,
    plan: Plan | None = None,
) -> None:
    """``out[rows, col0:col0+n_out] += (x[rows] A^T) B^T * scaling`` in float32, one rounding, in place.

    Args:
        x: ``(tokens, hidden)`` input of the projection(s).
        out: ``(tokens, width)`` their output; only ``rows`` x ``[col0, col0 + n_out)`` is written.
        rows: ``(n,)`` distinct int row indices on ``out``'s device.
        packed: :func:`pack_lowrank` output on ``out``'s device.
        precision: ``tl.dot`` input precision for the float32 products (default ``tf32x3`` on CUDA,
            about float32 accuracy on tensor cores; ``ieee`` is exact float32 FMA).
        plan: launch plan; default :func:`default_plan` for this device's SM count.
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
    hidden = int(x.shape[1])
    plan = plan or default_plan(n, hidden, _sm_count(out.device))
    want = precision or ("tf32x3" if out.device.type == "cuda" else "ieee")
    key = (str(out.device), want)
    use = _precision_ok.get(key, want)
    try:
        _launch(x, out, rows, packed, plan, use)
    except Exception as exc:
        if use == "ieee" or key in _precision_ok:
            raise
        # an older Triton or another backend without this dot precision: exact float32 instead
        logger.warning("HGKV kernel: input_precision=%s failed (%s); using ieee", use, exc)
        _precision_ok[key] = "ieee"
        _launch(x, out, rows, packed, plan, "ieee")
        return
    _precision_ok[key] = use


def _launch(
    x: torch.Tensor, out: torch.Tensor, rows: torch.Tensor, packed: PackedLowRank, plan: Plan, precision: str
) -> None:
    kernels = _kernels()
    n, hidden, r2 = int(rows.numel()), int(x.shape[1]), int(packed.a.shape[0])
    out_bf16 = out.dtype == torch.bfloat16
    tiles = -(-hidden // plan.block_k)
    k_split = -(-tiles // plan.split) * plan.block_k
    splits = -(-hidden // k_split)
    z = torch.empty((splits, n, r2), dtype=torch.float32, device=out.device)
    kernels["lowrank_project"][(-(-n // plan.block_m), splits)](
        x, rows, packed.a, packed.a3, z, n, hidden, k_split, x.stride(0), x.stride(1),
        R2=r2, BLOCK_M=plan.block_m, BLOCK_K=plan.block_k, PRECISION=precision,
        X_BF16=x.dtype == torch.bfloat16, UPCAST=_interpreting(),
        num_warps=plan.warps, num_stages=plan.stages,
    )  # fmt: skip
    kernels["lowrank_apply"][(-(-n // plan.apply_m), -(-packed.n_out // plan.block_n))](
        z, packed.b, out, rows, n, splits, packed.n_out, packed.col0, packed.scaling,
        out.stride(0), out.stride(1),
        R2=r2, BLOCK_M=plan.apply_m, BLOCK_N=plan.block_n, PRECISION=precision, OUT_BF16=out_bf16,
        num_warps=4,
    )  # fmt: skip


#: float32 unit roundoff; the accumulation unit is 2u (tensor cores may truncate when they accumulate)
U32 = 2.0**-24
#: per ``tl.dot`` precision: (relative error of one float32 product, tensor-core products accumulated per
#: term). ``tf32x3`` splits each operand into two tf32 halves (~21 bits kept: ``<= 2^-21`` per operand, plus
#: ``2^-22`` for the dropped small x small term, ``< 2^-19`` in all) and accumulates three products;
#: ``ieee`` multiplies exactly (FMA); ``tf32`` keeps 11 bits; ``bf16x3`` (stage 1 with bfloat16 input:
#: ``x`` times the three exact bf16 parts of ``A``) multiplies exactly and accumulates three products.
PRODUCT_ERROR = {"ieee": (0.0, 1), "tf32x3": (2.0**-19, 3), "tf32": (2.0**-10, 1), "bf16x3": (0.0, 3)}


def error_bound(
    x: torch.Tensor, rows: torch.Tensor, packed: PackedLowRank, base: torch.Tensor, precision: str
) -> torch.Tensor:
    """Per-element bound ``E`` on the kernel's float32 error before the final rounding (float64, ``(n, n_out)``).

    With ``y`` the exact (real) value ``base + s * B (A x)`` and ``t`` the float32 value the kernel rounds,
    ``|t - y| <= E`` and so ``|kernel - y| <= E + ½ ulp(kernel)`` in the output dtype, where (first order,
    any summation order or split of the hidden dim, Higham's ``gamma_n = n v / (1 - n v)``)::

        E = (u_1 + u_2 + gamma_{c1 K} + gamma_{c2 R2} + 2u) * M + u |base|,   M = s * (|x| |A|^T) |B|^T

    ``M`` is the residual evaluated in absolute values: the error of a dot product scales with the sum of
    the magnitudes of its products, not with its result (cancellation). ``u = 2^-24``; accumulation unit
    ``v = 2u`` (tensor cores may truncate); ``(u_1, c1)`` and ``(u_2, c2)`` (product error, products
    accumulated per term) of stage 1 (``x . A``: ``bf16x3`` for bfloat16 ``x``, else ``precision``) and
    stage 2 (``z . B``: ``precision``) from :data:`PRODUCT_ERROR`; ``K`` = hidden (summed in any order: split-K partials and their
    sum included), ``R2`` = the packed rank; one ``u`` for the scale, one for the sum with ``base``. Multiplied by 1.01 for second-order terms. This is a worst-case bound: for random data the
    observed error is ~``sqrt(K)`` times smaller (docs/HGKV.md, "Numerical contract").
    """
    k, r2 = int(x.shape[1]), int(packed.a.shape[0])
    v = 2 * U32

    def gamma(n: int) -> float:
        return n * v / (1 - n * v)

    u1, c1 = PRODUCT_ERROR["bf16x3" if x.dtype == torch.bfloat16 else precision]  # stage 1: x . A
    u2, c2 = PRODUCT_ERROR[precision]  # stage 2: z . B
    coeff = u1 + u2 + gamma(c1 * k) + gamma(c2 * r2) + 2 * U32
    xh = x.index_select(0, rows).double().abs()
    m = (xh @ packed.a.double().abs().T) @ packed.b.double().abs().T * abs(packed.scaling)
    return 1.01 * (coeff * m + U32 * base.double().abs())
