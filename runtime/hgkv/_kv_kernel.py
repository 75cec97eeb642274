"""The fused gated low-rank K/V update as a Triton kernel body (imports ``triton``; see :mod:`.kernel`).

Not decorated at import: :mod:`.kernel` wraps :func:`gated_lowrank_update` with ``triton.jit`` on first use,
once per mode (compiled, or Triton's interpreter when ``TRITON_INTERPRET=1``), so the environment variable
may be set after this module is imported. Triton reads the function's source, so it must live in a file.

One program handles ``BLOCK_M`` gathered rows ``i = ROWS[m]``::

    z[m, :]     = sum_k  X[i, k] * A[:, k]                       # (R2,) float32, A = [A_K; A_V] (R2, hidden)
    OUT[i, c0+n] = cast( float(OUT[i, c0+n]) + (z[m, :] . B[n, :]) * scaling )   # one rounding (to nearest even)

``B`` (n_out, R2) is block-diagonal for K and V (``[B_K 0; 0 B_V]``), so the K and V column slices, which
are adjacent in the fused ``qkv_proj`` output, are updated by the same program. Rows not in ``ROWS`` are
never read or written.
"""

from __future__ import annotations

import triton.language as tl


def gated_lowrank_update(
    X,
    OUT,
    ROWS,
    A,
    B,
    n_rows,
    hidden,
    n_out,
    col0,
    scaling,
    stride_xm,
    stride_xk,
    stride_om,
    stride_on,
    R2: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_K: tl.constexpr,
    BLOCK_N: tl.constexpr,
    PRECISION: tl.constexpr,
    OUT_BF16: tl.constexpr,
):
    pid = tl.program_id(0)
    offs_m = pid * BLOCK_M + tl.arange(0, BLOCK_M)
    m_mask = offs_m < n_rows
    rows = tl.load(ROWS + offs_m, mask=m_mask, other=0).to(tl.int64)
    offs_r = tl.arange(0, R2)
    z = tl.full((BLOCK_M, R2), 0.0, dtype=tl.float32)  # tl.full, not tl.zeros: builtins only (below)
    for k0 in range(0, hidden, BLOCK_K):
        offs_k = k0 + tl.arange(0, BLOCK_K)
        k_mask = offs_k < hidden
        x = tl.load(
            X + rows[:, None] * stride_xm + offs_k[None, :] * stride_xk,
            mask=m_mask[:, None] & k_mask[None, :],
            other=0.0,
        ).to(tl.float32)
        a_t = tl.load(A + offs_r[None, :] * hidden + offs_k[:, None], mask=k_mask[:, None], other=0.0)
        z = tl.dot(x, a_t, z, input_precision=PRECISION)
    for n0 in range(0, n_out, BLOCK_N):
        offs_n = n0 + tl.arange(0, BLOCK_N)
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
