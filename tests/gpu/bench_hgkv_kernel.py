"""The fused HGKV kernel against the torch reference on a GPU: per-layer time, prefill overhead, parity.

Shapes of a 7B-sized Qwen2.5-VL (hidden 3584, Q 3584, K = V = 512 columns of the fused ``qkv_proj``), the
prompt of ``bench_hgkv_prefill.py`` (header, ``B`` history screenshots at 1080p = 2691 tokens each, the
current screenshot). For each ``B`` in ``--histories`` (default 1 and 4) it reports, as one JSON object:

* ``per_layer``: one adapted layer's gated K/V update, the torch reference
  (``ServerHGKV.update_reference``) and the kernel (``ServerHGKV.update`` with the kernel selected, and a
  sweep of block sizes), next to the fused ``qkv_proj`` matmul of all prompt tokens; host (launch) time
  per call; the kernel's time as a fraction of ``qkv_proj``;
* ``parity``: bf16 kernel vs reference vs a float64 evaluation on those shapes (max abs differences, in
  bf16 ulps too), rows outside the history spans and the Q columns bitwise untouched;
* ``prefill`` (skipped by ``--no-model``): language-model prefill of the random 7B-sized model frozen, with
  the transformers adapter's gate active on the torch path and on the kernel, and the server-side update of
  8 layers (reference and kernel) as a share of the frozen prefill.

Every part runs in its own ``try``: a failure is reported as ``{"error": ...}`` and the others still run.
``--tiny`` runs small shapes on CPU under Triton's interpreter (a smoke test of the script)::

    python tests/gpu/bench_hgkv_kernel.py --out /tmp/kernel.json       # CUDA, bf16
    python tests/gpu/bench_hgkv_kernel.py --tiny                        # CPU smoke test
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def sweep_plans(rows: int, hidden: int, sms: int) -> list[Any]:
    """The shipped default and split-K variants around it."""
    from causalcache_memory.runtime.hgkv.kernel import Plan, default_plan

    plans = [default_plan(rows, hidden, sms)]
    for block_m, split in ((64, 1), (64, 2), (64, 3), (64, 4), (64, 7), (64, 14), (32, 4), (32, 7)):
        plans.append(Plan(block_m, 64, split))
    plans += [
        Plan(64, 64, 2, stages=4),
        Plan(64, 64, 7, stages=4),
        Plan(64, 128, 2),
        Plan(64, 64, 4, warps=8),
    ]
    plans += [Plan(64, 64, 2, block_n=256, apply_m=64), Plan(64, 64, 7, block_n=256, apply_m=64)]
    seen: dict[str, Any] = {}
    for plan in plans:
        seen.setdefault(plan.key, plan)
    return list(seen.values())


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc(limit=6)[-2000:]}


def _timer(device) -> Callable[[Callable[[], Any], int], float]:
    """``time(fn, n)``: median over 3 loops of ``n`` back-to-back calls, ms per call (device time on CUDA)."""
    import torch

    def run(fn: Callable[[], Any], n: int) -> float:
        for _ in range(3):
            fn()
        samples = []
        for _ in range(3):
            if device.type == "cuda":
                torch.cuda.synchronize()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                for _ in range(n):
                    fn()
                end.record()
                torch.cuda.synchronize()
                samples.append(start.elapsed_time(end) / n)
            else:
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                samples.append((time.perf_counter() - t0) * 1000.0 / n)
        return statistics.median(samples)

    return run


def _graph_ms(fn: Callable[[], Any], n: int, flush: Any = None) -> float:
    """Device time per call, ms: ``n`` calls captured in one CUDA graph, replayed (no host/launch overhead).

    With ``flush`` (a large buffer), every call is preceded by zeroing it (L2 evicted: cold caches, like
    ``triton.testing.do_bench``) and the time of a graph of the flushes alone is subtracted.
    """
    import torch

    def graph(body: Callable[[], Any]) -> Any:
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            body()  # warm-up (allocations, autotuning-free kernels compiled already)
        torch.cuda.current_stream().wait_stream(stream)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(n):
                body()
        return g

    def replay_ms(g: Any) -> float:
        g.replay()
        torch.cuda.synchronize()
        samples = []
        for _ in range(5):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            g.replay()
            end.record()
            torch.cuda.synchronize()
            samples.append(start.elapsed_time(end) / n)
        return statistics.median(samples)

    fn()
    torch.cuda.synchronize()
    if flush is None:
        return replay_ms(graph(fn))
    with_fn = replay_ms(graph(lambda: (flush.zero_(), fn())))
    alone = replay_ms(graph(flush.zero_))
    return with_fn - alone


def _host_us(fn: Callable[[], Any], device, n: int) -> float:
    """Host time per call without waiting for the device (Python + launch overhead), microseconds."""
    import torch

    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = (time.perf_counter() - t0) * 1e6 / n
    if device.type == "cuda":
        torch.cuda.synchronize()
    return round(host, 2)


def _do_bench(fn: Callable[[], Any], device) -> float | None:
    """Triton's ``do_bench`` (L2 flushed between calls, median), ms; None off CUDA or if unavailable."""
    if device.type != "cuda":
        return None
    try:
        from triton.testing import do_bench

        return float(do_bench(fn, warmup=10, rep=60, return_mode="median"))
    except Exception:
        return None


def shapes(tiny: bool) -> dict[str, int]:
    from bench_hgkv_prefill import CONFIG_7B, CONFIG_TINY

    text = (CONFIG_TINY if tiny else CONFIG_7B)["text"]
    hidden, heads, kv_heads = text["hidden_size"], text["num_attention_heads"], text["num_key_value_heads"]
    head_dim = hidden // heads
    return {"hidden": hidden, "q": heads * head_dim, "kv": kv_heads * head_dim}


def prompt_rows(history: int, tiny: bool) -> tuple[int, list[int]]:
    from bench_hgkv_prefill import TOKENS_1080P, layout

    image, header, turn = (24, 40, 8) if tiny else (TOKENS_1080P, 320, 30)
    total, spans = layout(history, image, header, turn)
    return total, [i for a, b in spans for i in range(a, b)]


def layer_case(history: int, tiny: bool, device, seed: int = 0) -> dict[str, Any]:
    """Random x, fused qkv weight, adapter weights and the history rows of one layer."""
    import torch

    s = shapes(tiny)
    total, rows = prompt_rows(history, tiny)
    gen = torch.Generator().manual_seed(seed)
    hidden, q, kv = s["hidden"], s["q"], s["kv"]
    x = torch.randn(total, hidden, generator=gen).to(device, torch.bfloat16)
    w = (torch.randn(q + 2 * kv, hidden, generator=gen) / hidden**0.5).to(device, torch.bfloat16)
    bias = (torch.randn(q + 2 * kv, generator=gen) * 0.02).to(device, torch.bfloat16)
    lora = (
        torch.randn(8, hidden, generator=gen) / hidden**0.5,
        torch.randn(kv, 8, generator=gen) * 0.05,
        torch.randn(8, hidden, generator=gen) / hidden**0.5,
        torch.randn(kv, 8, generator=gen) * 0.05,
    )
    lora = tuple(t.to(device) for t in lora)
    return {
        "x": x,
        "w": w,
        "bias": bias,
        "lora": lora,
        "rows": torch.tensor(rows, dtype=torch.long, device=device),
        "tokens": total,
        **s,
    }


def server(case: dict[str, Any], kernel: str):
    from causalcache_memory.runtime.sglang_server.adapter import ServerAdapterWeights
    from causalcache_memory.runtime.sglang_server.gating import ServerHGKV

    weights = ServerAdapterWeights({0: case["lora"]}, 8, 16.0, "bench")
    hgkv = ServerHGKV(weights, q_size=case["q"], kv_size=case["kv"], kernel=kernel, verify=False)
    hgkv._params = dict(weights.layers)  # already on the device
    return hgkv


def _guarded(out: dict[str, Any], key: str, fn: Callable[[], Any]) -> None:
    """``out[key] = fn()``, or the error under ``out["errors"][key]`` (one failing figure loses no other)."""
    try:
        out[key] = fn()
    except Exception as exc:
        out.setdefault("errors", {})[key] = f"{type(exc).__name__}: {str(exc)[:300]}"


def per_layer(history: int, tiny: bool, device, n: int) -> dict[str, Any]:
    """Per-layer times. CUDA: ``*_ms`` are device time from CUDA-graph replays with L2 flushed before every
    call (cold caches; ``*_warm_ms`` without the flush); ``*_eager_ms`` are back-to-back eager calls timed
    with events (what the first version reported: bounded below by the host time when that is larger);
    ``*_host_us`` is the host time per eager call (Python + launches, not waiting for the device)."""
    import torch
    import torch.nn.functional as F

    from causalcache_memory.runtime.hgkv.kernel import (
        _sm_count,
        default_plan,
        fused_lowrank_update,
    )

    case = layer_case(history, tiny, device)
    x, rows = case["x"], case["rows"]
    qkv = F.linear(x, case["w"], case["bias"])
    ref, ker = server(case, "torch"), server(case, "triton")
    n_rows, hidden, sms = int(rows.numel()), int(x.shape[1]), _sm_count(device)
    out: dict[str, Any] = {"tokens": case["tokens"], "history_tokens": n_rows, "sm_count": sms}
    out["default_plan"] = default_plan(n_rows, hidden, sms).key
    eager = _timer(device)
    cuda = device.type == "cuda"
    flush = torch.empty(256 * 2**20, dtype=torch.int8, device=device) if cuda else None

    def ms(fn: Callable[[], Any], cold: bool = True) -> Callable[[], float]:
        if not cuda:
            return lambda: round(eager(fn, n), 4)
        return lambda: round(_graph_ms(fn, n, flush if cold else None), 4)

    calls = {
        "qkv_proj": lambda: F.linear(x, case["w"], case["bias"]),
        "reference": lambda: ref.update(0, x, qkv, rows),
        "kernel": lambda: ker.update(0, x, qkv, rows),  # the shipped default plan
    }
    with torch.no_grad():
        for name, fn in calls.items():
            _guarded(out, f"{name}_ms", ms(fn))
            if cuda:
                _guarded(out, f"{name}_warm_ms", ms(fn, cold=False))
                _guarded(out, f"{name}_eager_ms", lambda fn=fn: round(eager(fn, n), 4))
        _guarded(
            out,
            "kernel_ieee_ms",
            ms(lambda: fused_lowrank_update(x, qkv, rows, ker.packed(0), precision="ieee")),
        )
        sweep: dict[str, Any] = {}
        plans = sweep_plans(n_rows, hidden, sms) if cuda else sweep_plans(n_rows, hidden, sms)[:3]
        for plan in plans:
            _guarded(
                sweep, plan.key, ms(lambda p=plan: fused_lowrank_update(x, qkv, rows, ker.packed(0), plan=p))
            )
        out["kernel_sweep_ms"] = sweep
        timed = {k: v for k, v in sweep.items() if isinstance(v, float)}
        if timed:
            best = min(timed, key=timed.__getitem__)
            out["kernel_sweep_best"] = {"plan": best, "ms": timed[best]}
        for name in ("reference", "kernel"):
            _guarded(out, f"{name}_host_us", lambda fn=calls[name]: _host_us(fn, device, n))
        _guarded(out, "kernel_do_bench_ms", lambda: _do_bench(calls["kernel"], device))
        _guarded(out, "qkv_proj_do_bench_ms", lambda: _do_bench(calls["qkv_proj"], device))
    if "qkv_proj_ms" in out:
        for name in ("kernel", "reference"):
            if f"{name}_ms" in out:
                out[f"{name}_over_qkv_proj"] = round(out[f"{name}_ms"] / out["qkv_proj_ms"], 4)
        if "kernel_sweep_best" in out:
            out["kernel_sweep_best"]["over_qkv_proj"] = round(
                out["kernel_sweep_best"]["ms"] / out["qkv_proj_ms"], 4
            )
    if "kernel_ms" in out and "reference_ms" in out:
        out["speedup"] = round(out["reference_ms"] / out["kernel_ms"], 2)
    return out


def parity(history: int, tiny: bool, device) -> dict[str, Any]:
    """bf16 kernel vs reference vs float64 on the benchmark shapes (fresh copies of one qkv output)."""
    import torch
    import torch.nn.functional as F

    from causalcache_memory.runtime.hgkv.kernel import error_bound, fused_lowrank_update

    case = layer_case(history, tiny, device, seed=1)
    x, rows, (a_k, b_k, a_v, b_v) = case["x"], case["rows"], case["lora"]
    q, kv = case["q"], case["kv"]
    with torch.no_grad():
        base = F.linear(x, case["w"], case["bias"])
        ref, ker, ieee = base.clone(), base.clone(), base.clone()
        server(case, "torch").update(0, x, ref, rows)
        server(case, "triton").update(0, x, ker, rows)
        fused_lowrank_update(x, ieee, rows, server(case, "triton").packed(0), precision="ieee")
        xh = x.index_select(0, rows).double()
        exact = base.double().index_select(0, rows)
        exact[:, q : q + kv] += (xh @ a_k.double().T) @ b_k.double().T * 2.0
        exact[:, q + kv :] += (xh @ a_v.double().T) @ b_v.double().T * 2.0
    untouched = torch.ones(base.shape[0], dtype=torch.bool, device=device)
    untouched[rows] = False

    def gated(t):
        return t.index_select(0, rows).double()

    def ulp(t):  # spacing of bf16 numbers at |t|; frexp is exact (CUDA's log2(8.0) can be 2.999...)
        mag = t.abs().clamp_min(torch.finfo(torch.bfloat16).tiny)
        return torch.ldexp(torch.ones_like(mag), torch.frexp(mag).exponent - 8)

    # bf16 spacing at the largest of result and residual: the reference rounds both (double rounding)
    largest = torch.maximum(torch.maximum(gated(ref).abs(), gated(ker).abs()), (exact - gated(base)).abs())
    # the kernel's float32 error bound before its one rounding (hk.error_bound, docs/HGKV.md), on K/V columns
    packed = server(case, "triton").packed(0)
    precision = "tf32x3" if device.type == "cuda" else "ieee"
    bound = torch.zeros_like(exact)
    bound[:, q:] = error_bound(x, rows, packed, base.index_select(0, rows)[:, q:], precision)
    k_err, r_err = (gated(ker) - exact).abs(), (gated(ref) - exact).abs()
    diff = (gated(ker) - gated(ref)).abs()
    return {
        "max_abs_diff_kernel_vs_reference": float(diff.max()),
        "max_diff_in_ulps_of_largest_operand": float((diff / ulp(largest)).max()),
        "elements_differing_from_reference_pct": round(100.0 * float((diff > 0).double().mean()), 4),
        "reference_max_abs_err_vs_float64": float(r_err.max()),
        "kernel_max_abs_err_vs_float64": float(k_err.max()),
        "kernel_ieee_max_abs_diff_vs_tf32x3": float((gated(ieee) - gated(ker)).abs().max()),
        "kernel_within_reference_rounding": bool((diff <= r_err + ulp(gated(ker)) / 2 + bound).all()),
        "kernel_rounded_once_within_bound": bool((k_err <= ulp(gated(ker)) / 2 + bound).all()),
        "bound_max_in_half_ulps": float((bound / (ulp(gated(ker)) / 2)).max()),
        "bound_median_in_half_ulps": float((bound / (ulp(gated(ker)) / 2))[:, q:].median()),
        "untouched_rows_bitwise": bool(torch.equal(ker[untouched], base[untouched])),
        "q_columns_bitwise": bool(torch.equal(ker[:, :q], base[:, :q])),
        "history_rows_changed": bool(not torch.equal(ker, base)),
    }


def prefill(
    histories: list[int], tiny: bool, device, repeats: int, out: dict[str, Any], done: Callable[[int], None]
) -> None:
    """Fill ``out`` (build time, then one row per history count, ``done(B)`` after each)."""
    import torch
    from bench_hgkv_prefill import CONFIG_7B, CONFIG_TINY, build, layout, timed

    from causalcache_memory.runtime.hgkv import HGKVAdapter, HGKVConfig
    from causalcache_memory.runtime.hgkv.kernel import KERNEL_ENV

    config = CONFIG_TINY if tiny else CONFIG_7B
    dtype = torch.float32 if tiny else torch.bfloat16
    t0 = time.perf_counter()
    model = build(config, device, dtype)
    adapter = HGKVAdapter.attach(model, HGKVConfig(r=8, alpha=16.0, num_layers=8))
    with torch.no_grad():
        for module in adapter.modules.values():
            module.B.normal_(0.0, 0.02)
    out["build_s"] = round(time.perf_counter() - t0, 1)
    lm, hidden = model.model.language_model, config["text"]["hidden_size"]
    image, header, turn = (24, 40, 8) if tiny else (2691, 320, 30)
    before = os.environ.get(KERNEL_ENV)
    for history in histories:
        total, spans = layout(history, image, header, turn)
        gen = torch.Generator(device="cpu").manual_seed(1)
        embeds = (torch.randn(1, total, hidden, generator=gen) * 0.02).to(device, dtype)
        positions = torch.arange(total, device=device).view(1, 1, -1).expand(3, 1, -1)
        mask = torch.zeros(1, total, dtype=torch.bool)
        for a, b in spans:
            mask[0, a:b] = True

        @torch.no_grad()
        def run(embeds=embeds, positions=positions) -> Any:
            adapter.state.prefilled.clear()
            return lm(inputs_embeds=embeds, position_ids=positions, use_cache=False).last_hidden_state

        row: dict[str, Any] = {"prompt_tokens": total, "history_tokens": int(mask.sum())}
        row["frozen_ms"] = round(timed(run, device, repeats, 2), 3)
        adapter.state.mask = mask.to(device)
        try:
            results: dict[str, Any] = {}
            for mode in ("torch", "triton"):
                os.environ[KERNEL_ENV] = mode
                _guarded(row, f"hgkv_{mode}_ms", lambda: round(timed(run, device, repeats, 2), 3))
                _guarded(results, mode, lambda: run().float())
            if "torch" in results and "triton" in results:
                row["hgkv_kernel_vs_torch_max_abs_diff_last_hidden"] = float(
                    (results["triton"] - results["torch"]).abs().max()
                )
            row.setdefault("errors", {}).update(results.get("errors", {}))
        finally:
            adapter.state.mask = None
            if before is None:
                os.environ.pop(KERNEL_ENV, None)
            else:
                os.environ[KERNEL_ENV] = before
        for mode in ("torch", "triton"):
            if f"hgkv_{mode}_ms" not in row:
                continue
            row[f"hgkv_{mode}_overhead_pct"] = round(
                100.0 * (row[f"hgkv_{mode}_ms"] / row["frozen_ms"] - 1), 2
            )
        out[f"history_{history}"] = row
        done(history)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="small shapes on CPU, Triton interpreter")
    parser.add_argument("--histories", default="1,4", help="history screenshot counts B")
    parser.add_argument("--iters", type=int, default=20, help="calls per timing loop (per-layer)")
    parser.add_argument("--repeats", type=int, default=3, help="prefill repeats")
    parser.add_argument("--no-model", action="store_true", help="skip the 7B-sized model prefill")
    parser.add_argument("--out", default=None, help="also write the JSON here")
    args = parser.parse_args()
    if args.tiny:
        os.environ["TRITON_INTERPRET"] = "1"
        args.iters, args.repeats = min(args.iters, 2), min(args.repeats, 1)

    from bench_hgkv_prefill import _import_project

    _import_project()
    import torch

    result: dict[str, Any] = {"script": "tests/gpu/bench_hgkv_kernel.py", "tiny": args.tiny}
    if not args.tiny and not torch.cuda.is_available():
        raise SystemExit("CUDA is not available; run with --tiny for the CPU smoke test")
    device = torch.device("cpu" if args.tiny else "cuda")
    try:
        import triton

        triton_version = triton.__version__
    except Exception as exc:
        triton_version = f"unavailable: {exc}"
    result["machine"] = (
        torch.cuda.get_device_name(0) if device.type == "cuda" else platform.processor() or "cpu"
    )
    result["torch"], result["triton"] = torch.__version__, triton_version
    result["shapes"] = shapes(args.tiny)
    histories = [int(h) for h in args.histories.split(",") if h.strip()]
    layer_ms: dict[int, dict[str, Any]] = {}

    def dump() -> None:  # after every part, so a timeout keeps what was measured
        if args.out:
            Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    for history in histories:
        key = f"history_{history}"
        try:
            layer_ms[history] = per_layer(history, args.tiny, device, args.iters)
            result.setdefault("per_layer", {})[key] = layer_ms[history]
        except Exception as exc:
            result.setdefault("per_layer", {})[key] = _error(exc)
        try:
            result.setdefault("parity", {})[key] = parity(history, args.tiny, device)
        except Exception as exc:
            result.setdefault("parity", {})[key] = _error(exc)
        dump()

    def server_share(history: int) -> None:
        row, pre = layer_ms.get(history, {}), result["prefill"][f"history_{history}"]
        for mode in ("reference", "kernel"):
            if f"{mode}_ms" in row and "frozen_ms" in pre:
                pre[f"server_{mode}_8_layers_ms"] = round(8 * row[f"{mode}_ms"], 4)
                pre[f"server_{mode}_pct_of_frozen_prefill"] = round(
                    100.0 * 8 * row[f"{mode}_ms"] / pre["frozen_ms"], 3
                )
        dump()

    if not args.no_model:
        result["prefill"] = {}
        try:
            if device.type == "cuda":
                torch.cuda.empty_cache()
            # the larger prompt first: its overhead is the target
            order = sorted(histories, reverse=True)
            prefill(order, args.tiny, device, args.repeats, result["prefill"], server_share)
        except Exception as exc:
            result["prefill"].update(_error(exc))
    dump()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
