"""The fused gated low-rank K/V update as Triton kernel bodies (imports ``triton``; see :mod:`.kernel`).

Not decorated at import: :mod:`.kernel` wraps them with ``triton.jit`` on first use, once per mode (compiled,
or Triton's interpreter when ``TRITON_INTERPRET=1``), so the environment variable may be set after this
module is imported. Triton reads a function's source, so they must live in a file.

Two stages (the default; :func:`lowrank_project` then :func:`lowrank_apply`), split-K over the hidden dim
(bfloat16 inputs: three exact bf16 products per term, see :func:`lowrank_project`)::

    Z[s, m, :]   = sum_{k in split s}  X[i, k] * A[:, k]        # (R2,) float32 partial, A = [A_K; A_V] (R2, hidden)
    OUT[i, c0+n] = cast( float(OUT[i, c0+n]) + ((sum_s Z[s, m, :]) . B[n, :]) * scaling )  # one rounding

with ``i = ROWS[m]``. Stage 1 runs ``row blocks x splits`` programs (enough to fill the GPU even for one
history image; each reads a ``BLOCK_M x K/splits`` slab of ``X`` once), stage 2 ``row blocks x column
blocks`` programs (the K/V columns are read and written once, in parallel). The partials are summed in a
fixed order (s = 0, 1, ...), so results are deterministic. ``B`` (n_out, R2) is block-diagonal for K and V
(``[B_K 0; 0 B_V]``), so the adjacent K and V column slices of the fused ``qkv_proj`` output are one range.

Rows not in ``ROWS`` are never read or written by either stage.
"""

from __future__ import annotations

import triton.language as tl


def lowrank_project(
    X,
    ROWS,
    A,
    A3,
    Z,
    n_rows,
    hidden,
    k_split,
    stride_xm,
    stride_xk,
    R2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    PRECISION: tl.constexpr,
    X_BF16: tl.constexpr,
    UPCAST: tl.constexpr,
):
    """Stage 1: ``Z[s, m, :] = X[ROWS[m], s*k_split : (s+1)*k_split] @ A[:, same]^T`` (float32).

    bfloat16 ``X`` (``X_BF16``): ``A3`` is ``A`` split exactly into three bfloat16 parts (``A = A3[0] + A3[1]
    + A3[2]``, 8 + 8 + 8 significand bits), and ``z`` accumulates three native bf16 tensor-core products of
    the untouched ``X`` tile: every product is exact in float32, no conversion of ``X``. Otherwise ``X`` is
    converted to float32 and multiplied with ``A`` at ``PRECISION``.
    """
    pid_m = tl.program_id(0)
    pid_s = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = offs_m < n_rows
    rows = tl.load(ROWS + offs_m, mask=m_mask, other=0).to(tl.int64)
    offs_r = tl.arange(0, R2)
    k_lo = pid_s * k_split
    z = tl.full((BLOCK_M, R2), 0.0, dtype=tl.float32)  # tl.full, not tl.zeros: builtins only (kernel.py)
    for kk in range(0, k_split, BLOCK_K):
        offs_k = k_lo + kk + tl.arange(0, BLOCK_K)
        k_mask = offs_k < hidden
        x = tl.load(
            X + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk,
            mask=m_mask[:, None] & k_mask[None, :],
            other=0.0,
        )
        if X_BF16:
            a_ptrs = A3 + offs_r[None, :] * hidden + offs_k[:, None]
            for part in tl.static_range(3):
                a_part = tl.load(a_ptrs + part * R2 * hidden, mask=k_mask[:, None], other=0.0)
                if UPCAST:  # the interpreter's bf16 dot is not float arithmetic; float32 FMA is as exact
                    z = tl.dot(x.to(tl.float32), a_part.to(tl.float32), z, input_precision="ieee")
                else:
                    z = tl.dot(x, a_part, z)
        else:
            a_t = tl.load(A + offs_r[None, :] * hidden + offs_k[:, None], mask=k_mask[:, None], other=0.0)
            z = tl.dot(x.to(tl.float32), a_t, z, input_precision=PRECISION)
    z_ptrs = Z + (pid_s * n_rows + offs_m[:, None]).to(tl.int64) * R2 + offs_r[None, :]
    tl.store(z_ptrs, z, mask=m_mask[:, None])


def lowrank_apply(
    Z,
    B,
    OUT,
    ROWS,
    n_rows,
    n_splits,
    n_out,
    col0,
    scaling,
    stride_om,
    stride_on,
    R2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
    OUT_BF16: tl.constexpr,
):
    """Stage 2: ``OUT[ROWS[m], col0 + n] = cast(OUT + (sum_s Z[s, m]) . B[n] * scaling)`` for one tile."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = offs_m < n_rows
    rows = tl.load(ROWS + offs_m, mask=m_mask, other=0).to(tl.int64)
    offs_r = tl.arange(0, R2)
    z = tl.full((BLOCK_M, R2), 0.0, dtype=tl.float32)
    for s in range(0, n_splits):
        z_ptrs = Z + (s * n_rows + offs_m[:, None]).to(tl.int64) * R2 + offs_r[None, :]
        z += tl.load(z_ptrs, mask=m_mask[:, None], other=0.0)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = offs_n < n_out
    b_t = tl.load(B + offs_n[None, :] * R2 + offs_r[:, None], mask=n_mask[None, :], other=0.0)
    delta = tl.dot(z, b_t, input_precision=PRECISION) * scaling
    ptrs = OUT + rows[:, None] * stride_om + (col0 + offs_n[None, :]) * stride_on
    mask = m_mask[:, None] & n_mask[None, :]
    base = tl.load(ptrs, mask=mask, other=0.0)
    total = base.to(tl.float32) + delta
    if OUT_BF16:
        # float32 -> bfloat16 rounded to nearest even, spelled out in integer ops so that Triton's CPU
        # interpreter (which truncates this cast) rounds exactly like the GPU's cvt.rn.bf16.f32
        bits = total.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
        tl.store(ptrs, bits.to(tl.uint16).to(tl.bfloat16, bitcast=True), mask=mask)
    else:
        tl.store(ptrs, total.to(OUT.dtype.element_ty), mask=mask)
