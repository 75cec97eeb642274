"""The fused gated K/V kernel against the torch reference: random rows, chunk windows, mixed batches.

CPU: Triton's interpreter (``TRITON_INTERPRET=1``); the same tests run compiled on CUDA (marker ``gpu``).
Numerical contract (docs/HGKV.md, "The fused kernel"): rows outside ``rows`` and the Q columns are
bitwise untouched; in bfloat16 the kernel rounds once: it is within ½ ulp + ``E`` of the exact value, ``E``
the derived float32 error bound (``hk.error_bound``: it scales with the residual evaluated in absolute
values, not with the result), and differs from the reference by at most the reference's own rounding,
one bf16 ulp of the larger of result and residual; in float32 both agree to float32 round-off.
"""

from __future__ import annotations

import pytest
import torch

from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime.hgkv import kernel as hk

pytest.importorskip("triton", reason="the fused HGKV kernel needs triton (`pip install triton`)")

DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
        ],
    ),
]


@pytest.fixture(params=DEVICES)
def device(request, monkeypatch) -> torch.device:
    if request.param == "cpu":
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    else:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    return torch.device(request.param)


def _weights(hidden: int, kv: int, r: int, seed: int, device: torch.device):
    gen = torch.Generator().manual_seed(seed)
    out = [
        torch.randn(r, hidden, generator=gen) / hidden**0.5,
        torch.randn(kv, r, generator=gen) * 0.5,
        torch.randn(r, hidden, generator=gen) / hidden**0.5,
        torch.randn(kv, r, generator=gen) * 0.5,
    ]
    return [t.to(device) for t in out]


def _reference(x, qkv, rows, weights, q: int, kv: int, scaling: float) -> torch.Tensor:
    """Today's server path (``ServerHGKV.update_reference``), out of place."""
    a_k, b_k, a_v, b_v = weights
    out = qkv.clone()
    x_h = x.index_select(0, rows).float()
    out[:, q : q + kv].index_add_(0, rows, ((x_h @ a_k.T) @ b_k.T * scaling).to(qkv.dtype))
    out[:, q + kv :].index_add_(0, rows, ((x_h @ a_v.T) @ b_v.T * scaling).to(qkv.dtype))
    return out


def _exact(x, qkv, rows, weights, q: int, kv: int, scaling: float) -> torch.Tensor:
    a_k, b_k, a_v, b_v = (w.double() for w in weights)
    out = qkv.double().clone()
    x_h = x.index_select(0, rows).double()
    out[rows, q : q + kv] += (x_h @ a_k.T) @ b_k.T * scaling
    out[rows, q + kv :] += (x_h @ a_v.T) @ b_v.T * scaling
    return out


def _ulp_bf16(v: torch.Tensor) -> torch.Tensor:
    """Spacing of bfloat16 numbers at ``|v|`` (8 significand bits)."""
    mag = v.abs().clamp_min(torch.finfo(torch.bfloat16).tiny)
    return torch.ldexp(torch.ones_like(mag), torch.frexp(mag).exponent - 8)  # exact (log2 is not, on CUDA)


def _case(device, *, tokens: int, hidden: int, q: int, kv: int, rows: list[int], dtype, seed: int = 0):
    gen = torch.Generator().manual_seed(100 + seed)
    x = torch.randn(tokens, hidden, generator=gen).to(device, dtype)
    qkv = (torch.randn(tokens, q + 2 * kv, generator=gen) * 4).to(device, dtype)
    weights = _weights(hidden, kv, 8, seed, device)
    packed = hk.pack_lowrank([(weights[0], weights[1]), (weights[2], weights[3])], col0=q, scaling=2.0)
    row_t = torch.tensor(rows, dtype=torch.long, device=device)
    out = qkv.clone()
    hk.fused_lowrank_update(x, out, row_t, packed)
    return x, qkv, out, row_t, weights


def _bound(x, qkv, rows, weights, q: int, precision: str | None = None) -> torch.Tensor:
    """``hk.error_bound`` (float32 error before the final rounding) placed on ``qkv``'s grid, 0 elsewhere."""
    packed = hk.pack_lowrank([(weights[0], weights[1]), (weights[2], weights[3])], col0=q, scaling=2.0)
    # the kernel's default precision (a fallback to ieee on CUDA only makes the error smaller)
    precision = precision or ("tf32x3" if qkv.device.type == "cuda" else "ieee")
    bound = torch.zeros(qkv.shape, dtype=torch.float64, device=qkv.device)
    bound[rows, q:] = hk.error_bound(x, rows, packed, qkv[rows, q:], precision)
    return bound


def _rounded_once(got: torch.Tensor, exact: torch.Tensor, bound: torch.Tensor) -> torch.Tensor:
    """Elementwise: ``got`` (bf16 values as float64) is a nearest rounding of something within ``bound``."""
    return (got - exact).abs() <= _ulp_bf16(got) / 2 + bound


def _check_contract(x, qkv, out, rows, weights, q: int, kv: int) -> None:
    untouched = torch.ones(qkv.shape[0], dtype=torch.bool, device=qkv.device)
    untouched[rows] = False
    assert torch.equal(out[untouched], qkv[untouched])  # rows outside the history spans: bitwise
    assert torch.equal(out[:, :q], qkv[:, :q])  # Q columns: bitwise
    ref = _reference(x, qkv, rows, weights, q, kv, 2.0)
    assert not torch.equal(out, qkv)
    if qkv.dtype == torch.bfloat16:
        exact = _exact(x, qkv, rows, weights, q, kv, 2.0)
        got, want = out.double(), ref.double()
        bound = _bound(x, qkv, rows, weights, q)  # the derived float32 error bound (docs/HGKV.md)
        assert bool(_rounded_once(got, exact, bound).all())
        assert bool(((got - want).abs() <= (want - exact).abs() + _ulp_bf16(got) / 2 + bound).all())
        assert (got - exact).abs().max() <= (want - exact).abs().max()
        # the reference's own rounding: half an ulp for the residual's cast plus half for the sum
        largest = torch.maximum(torch.maximum(got.abs(), want.abs()), (exact - qkv.double()).abs())
        assert bool(((got - want).abs() <= _ulp_bf16(largest)).all())
    else:
        torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-5)


def test_the_bound_is_tight_enough_to_catch_bugs() -> None:
    """The derived bound rejects the bugs it exists to catch, on the shapes the parity tests use (CPU)."""
    rows = [40 + r for r in range(12, 30)]
    gen = torch.Generator().manual_seed(100)
    x = torch.randn(80, 64, generator=gen).to(torch.bfloat16)
    qkv = (torch.randn(80, 64, generator=gen) * 4).to(torch.bfloat16)
    w = _weights(64, 16, 8, 0, torch.device("cpu"))
    row_t = torch.tensor(rows)
    exact = _exact(x, qkv, row_t, w, 32, 16, 2.0)
    for precision in ("ieee", "tf32x3"):  # the interpreter's and CUDA's arithmetic
        _bound_catches_bugs(x, qkv, row_t, w, exact, _bound(x, qkv, row_t, w, 32, precision))


def _bound_catches_bugs(x, qkv, row_t, w, exact, bound) -> None:
    gated = torch.zeros_like(bound, dtype=torch.bool)
    gated[row_t, 32:] = True
    assert bool(_rounded_once(exact.to(torch.bfloat16).double(), exact, bound).all())  # the ideal passes
    assert float((bound[gated] / (_ulp_bf16(exact[gated]) / 2)).median()) < 0.25  # well below ½ ulp
    bugs = {
        "double rounding (the reference)": _reference(x, qkv, row_t, w, 32, 16, 2.0),
        "scale off by 2^-6": _reference(x, qkv, row_t, w, 32, 16, 2.0 * (1 + 2**-6)),
        "K and V swapped": _reference(x, qkv, row_t, [w[2], w[1], w[0], w[3]], 32, 16, 2.0),
        "a missing row": _reference(x, qkv, row_t[1:], w, 32, 16, 2.0),
        "residual added twice": _reference(
            x, _reference(x, qkv, row_t, w, 32, 16, 2.0), row_t, w, 32, 16, 2.0
        ),
    }
    for name, wrong in bugs.items():
        assert not bool(_rounded_once(wrong.double(), exact, bound).all()), name


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_random_rows_match_the_reference(device, dtype) -> None:
    gen = torch.Generator().manual_seed(7)
    rows = sorted(torch.randperm(90, generator=gen)[:37].tolist())  # not a multiple of any block
    x, qkv, out, row_t, w = _case(device, tokens=90, hidden=200, q=48, kv=40, rows=rows, dtype=dtype)
    _check_contract(x, qkv, out, row_t, w, 48, 40)


def test_unsorted_rows_and_a_single_row(device) -> None:
    for rows in ([17, 3, 29, 4, 0], [31]):
        x, qkv, out, row_t, w = _case(
            device, tokens=32, hidden=64, q=32, kv=16, rows=rows, dtype=torch.bfloat16
        )
        _check_contract(x, qkv, out, row_t, w, 32, 16)


def test_chunked_windows_equal_one_pass(device) -> None:
    """Chunked prefill: the token rows updated window by window equal one update over all tokens."""
    rows = list(range(10, 26)) + list(range(35, 51))
    x, qkv, full, _, w = _case(device, tokens=60, hidden=96, q=32, kv=16, rows=rows, dtype=torch.bfloat16)
    packed = hk.pack_lowrank([(w[0], w[1]), (w[2], w[3])], col0=32, scaling=2.0)
    parts = []
    for lo, hi in ((0, 18), (18, 40), (40, 60)):
        chunk = qkv[lo:hi].clone()
        local = torch.tensor([r - lo for r in rows if lo <= r < hi], dtype=torch.long, device=device)
        hk.fused_lowrank_update(x[lo:hi], chunk, local, packed)
        parts.append(chunk)
    chunked = torch.cat(parts)
    # per-row arithmetic does not depend on the window, up to float32 summation order (one bf16 ulp)
    assert bool(((chunked.float() - full.float()).abs() <= _ulp_bf16(full.float())).all())
    assert torch.equal(chunked[:10], qkv[:10]) and torch.equal(chunked[26:35], qkv[26:35])


def test_mixed_batch_touches_only_the_history_request(device) -> None:
    """Two requests flattened: rows of the first (no history image) stay bitwise its base output."""
    rows = [40 + r for r in range(12, 30)]
    x, qkv, out, row_t, w = _case(device, tokens=80, hidden=64, q=32, kv=16, rows=rows, dtype=torch.bfloat16)
    assert torch.equal(out[:40], qkv[:40])
    _check_contract(x, qkv, out, row_t, w, 32, 16)


def test_no_rows_is_a_no_op(device) -> None:
    x, _, out, _, w = _case(device, tokens=8, hidden=32, q=16, kv=16, rows=[1], dtype=torch.bfloat16)
    packed = hk.pack_lowrank([(w[0], w[1])], col0=16, scaling=2.0)
    before = out.clone()
    hk.fused_lowrank_update(x, out, torch.zeros(0, dtype=torch.long, device=device), packed)
    assert torch.equal(out, before)


PLANS = [
    hk.Plan(32, 32, 3),  # split-K: 160 = 64 + 64 + 32 (a short last split)
    hk.Plan(16, 64, 2, block_n=16, apply_m=16),
    hk.Plan(64, 32, 5, warps=8, stages=2),  # one split per 32-wide tile
]


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: p.key)
def test_plans_do_not_change_the_result(device, plan) -> None:
    rows = list(range(3, 70, 2))
    x, qkv, out, row_t, w = _case(device, tokens=72, hidden=160, q=32, kv=24, rows=rows, dtype=torch.float32)
    packed = hk.pack_lowrank([(w[0], w[1]), (w[2], w[3])], col0=32, scaling=2.0)
    other = qkv.clone()
    hk.fused_lowrank_update(x, other, row_t, packed, plan=plan)
    torch.testing.assert_close(other, out, rtol=1e-5, atol=1e-5)


def test_a_plan_without_split_k_is_refused() -> None:
    with pytest.raises(ValueError, match=r"split=0.*split >= 1"):
        hk.Plan(16, 128, 0)


@pytest.mark.parametrize("plan", PLANS[:1] + PLANS[2:], ids=lambda p: p.key)
def test_split_plans_keep_the_bf16_contract(device, plan) -> None:
    gen = torch.Generator().manual_seed(5)
    rows = sorted(torch.randperm(90, generator=gen)[:41].tolist())
    x, qkv, _, row_t, w = _case(device, tokens=90, hidden=200, q=48, kv=40, rows=rows, dtype=torch.bfloat16)
    packed = hk.pack_lowrank([(w[0], w[1]), (w[2], w[3])], col0=48, scaling=2.0)
    out = qkv.clone()
    hk.fused_lowrank_update(x, out, row_t, packed, plan=plan)
    _check_contract(x, qkv, out, row_t, w, 48, 40)


def test_default_plan_fills_the_gpu_from_the_shape() -> None:
    """The heuristic: >= 2 stage-1 programs per SM where the hidden dim allows, >= 4 tiles per program."""
    one, four = hk.default_plan(2691, 3584, 132), hk.default_plan(10764, 3584, 132)
    assert (one.block_m, one.block_k, one.split) == (64, 64, 7)  # 43 row blocks x 7 = 301 programs
    assert (four.block_m, four.block_k, four.split) == (64, 64, 2)  # 169 x 2 = 338
    for n in (1, 17, 300, 2691, 5000, 10764, 100000):
        for hidden, sms in ((3584, 132), (3584, 78), (1536, 132), (64, 4)):
            plan = hk.default_plan(n, hidden, sms)
            tiles = -(-hidden // plan.block_k)
            per_split = -(-tiles // plan.split)
            assert plan.split >= 1 and (plan.split - 1) * per_split < tiles  # no empty split
            assert per_split >= min(4, tiles)
            programs = -(-n // plan.block_m) * plan.split
            assert programs >= 2 * sms or per_split < 8  # else limited by the 4-tile floor


def test_pack_is_block_diagonal() -> None:
    a_k, b_k, a_v, b_v = _weights(12, 6, 4, 0, torch.device("cpu"))
    packed = hk.pack_lowrank([(a_k, b_k), (a_v, b_v)], col0=5, scaling=3.0)
    assert packed.a.shape == (16, 12) and packed.b.shape == (12, 16) and packed.n_out == 12
    assert torch.equal(packed.a[:4], a_k) and torch.equal(packed.a[4:8], a_v) and not packed.a[8:].any()
    assert torch.equal(packed.b[:6, :4], b_k) and torch.equal(packed.b[6:, 4:8], b_v)
    # three bfloat16 parts that sum exactly to A (the bf16-input stage-1 products are then exact)
    assert packed.a3.shape == (3, 16, 12) and packed.a3.dtype == torch.bfloat16
    assert torch.equal(packed.a3[0].float() + packed.a3[1].float() + packed.a3[2].float(), packed.a)
    assert bool(packed.a3[2].any())  # float32 weights need the third part
    assert not packed.b[:6, 4:].any() and not packed.b[6:, :4].any()


def test_selection(monkeypatch) -> None:
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    monkeypatch.delenv(hk.KERNEL_ENV, raising=False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert hk.kernel_choice() == "auto"
    assert not hk.use_kernel(cpu) and hk.use_kernel(cuda)  # auto: CUDA with triton, torch elsewhere
    assert not hk.use_kernel(cuda, "torch")
    with pytest.raises(ConfigError, match="TRITON_INTERPRET"):
        hk.use_kernel(cpu, "triton")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert hk.use_kernel(cpu, "triton")
    monkeypatch.setenv(hk.KERNEL_ENV, "fast")
    with pytest.raises(ConfigError, match="CAUSALCACHE_HGKV_KERNEL='fast'"):
        hk.kernel_choice()


def test_auto_without_triton_is_the_torch_path(monkeypatch) -> None:
    monkeypatch.setattr(hk, "triton_available", lambda: False)
    assert not hk.use_kernel(torch.device("cuda"), "auto")
    with pytest.raises(ConfigError, match="pip install triton"):
        hk.use_kernel(torch.device("cuda"), "triton")


def test_gated_linear_kernel_path_matches_its_torch_path(device, monkeypatch) -> None:
    """The transformers adapter's wrapped projection: kernel (no autograd) vs torch path, same weights."""
    from torch import nn

    from causalcache_memory.runtime.hgkv import layer as layer_mod
    from causalcache_memory.runtime.hgkv.layer import GateState, HistoryGatedLinear

    launches: list[int] = []
    real = layer_mod.fused_lowrank_update
    monkeypatch.setattr(
        layer_mod, "fused_lowrank_update", lambda *a, **k: (launches.append(1), real(*a, **k))[1]
    )
    torch.manual_seed(3)
    state = GateState()
    layer = HistoryGatedLinear(nn.Linear(48, 24), r=8, alpha=16.0, gated=True, state=state)
    layer = layer.to(device=device)
    layer.base_layer.to(torch.bfloat16)
    with torch.no_grad():
        layer.B.normal_(0.0, 0.5)
    x = torch.randn(2, 20, 48, device=device).to(torch.bfloat16)
    mask = torch.zeros(2, 20, dtype=torch.bool, device=device)
    mask[0, 3:9] = True
    mask[1, 12:20] = True
    state.mask = mask
    outs = {}
    for mode in ("torch", "triton"):
        monkeypatch.setenv(hk.KERNEL_ENV, mode)
        state.prefilled.clear()
        with torch.no_grad():
            outs[mode] = layer(x)
    assert launches == [1]  # the triton run made one fused update, the torch run none
    base = layer.base_layer(x).detach()
    assert torch.equal(outs["triton"][~mask], base[~mask])  # rows outside the gate: the frozen output
    diff = (outs["triton"].float() - outs["torch"].float()).abs()
    largest = torch.maximum(outs["torch"].float().abs(), (outs["torch"].float() - base.float()).abs())
    assert bool((diff <= 2 * _ulp_bf16(largest)).all())  # both round the same float32 residual
    assert not torch.equal(outs["triton"], base)
    with torch.enable_grad():  # training: the torch path, gradients reach the adapter
        state.prefilled.clear()
        layer(x).float().sum().backward()
    assert layer.B.grad is not None and bool(layer.B.grad.abs().sum() > 0)
    assert launches == [1]


@pytest.mark.parametrize("adapted", ["k", "v", "kv"])
def test_server_update_kernel_matches_reference_for_k_v_or_both(device, adapted) -> None:
    from causalcache_memory.runtime.sglang_server.adapter import ServerAdapterWeights
    from causalcache_memory.runtime.sglang_server.gating import ServerHGKV

    a_k, b_k, a_v, b_v = _weights(64, 16, 8, 4, device)
    tensors = (a_k if "k" in adapted else None, b_k if "k" in adapted else None)
    tensors += (a_v if "v" in adapted else None, b_v if "v" in adapted else None)
    weights = ServerAdapterWeights({0: tensors}, 8, 16.0, "test")
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(30, 64, generator=gen).to(device, torch.float32)
    base = torch.randn(30, 64, generator=gen).to(device, torch.float32)
    rows = torch.tensor([2, 5, 6, 7, 20, 29], device=device)
    outs = {}
    for mode in ("torch", "triton"):
        server = ServerHGKV(weights, q_size=32, kv_size=16, kernel=mode, verify=False)
        server._params = dict(weights.layers)
        outs[mode] = base.clone()
        server.update(0, x, outs[mode], rows)
    torch.testing.assert_close(outs["triton"], outs["torch"], rtol=1e-5, atol=1e-5)
    k_changed = not torch.equal(outs["triton"][:, 32:48], base[:, 32:48])
    v_changed = not torch.equal(outs["triton"][:, 48:], base[:, 48:])
    assert (k_changed, v_changed) == ("k" in adapted, "v" in adapted)
    assert torch.equal(outs["triton"][:, :32], base[:, :32])
