#!/usr/bin/env bash
# The fused HGKV kernel's GPU checks in one run (issue 29); ~2-3 minutes on one H100/H200, at most
# 4 minutes (the bench writes its JSON after every part, so a timeout keeps what was measured).
#
#   OUT=/some/dir bash tests/gpu/run_kernel_checks.sh          # from the repository root
#
# Runs from the checkout without installing it (PYTHONPATH to a temporary tree that maps runtime/ and
# integrations/ into causalcache_memory, as pyproject's package-dir does), needs no download, and needs
# torch (CUDA), triton, transformers, safetensors, numpy and pytest. Each step has its own timeout and
# its own status; a failing step does not stop the others. Writes to $OUT (default ./kernel-checks):
#   bench_kernel.json / .log   tests/gpu/bench_hgkv_kernel.py (per-layer times, parity, prefill overhead)
#   pytest_gpu.log / .xml      CUDA-marked tests: tests/gpu and the kernel's parity tests on CUDA
#   summary.json               the figures and checks below, also printed to stdout
# BENCH_ARGS="--tiny" PYTHON=.venv/bin/python runs the same on CPU (Triton interpreter; a smoke test).
# Then check pytest_gpu.log: the CUDA-marked tests skip there.
set -u
OUT_NAME=kernel-checks . "$(dirname "${BASH_SOURCE[0]}")/checkout_site.sh"   # ROOT, OUT, PY; imports from the checkout
unset TRITON_INTERPRET CAUSALCACHE_HGKV_KERNEL

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || true

echo "[run_kernel_checks] bench (timeout 180 s)" >&2
timeout 180 "$PY" "$ROOT/tests/gpu/bench_hgkv_kernel.py" ${BENCH_ARGS:-} --out "$OUT/bench_kernel.json" > "$OUT/bench_kernel.log" 2>&1
BENCH_RC=$?

echo "[run_kernel_checks] pytest -m gpu (timeout 60 s)" >&2
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout 60 "$PY" -m pytest -q -p no:cacheprovider -o addopts="-ra" -W default -m gpu \
    --rootdir "$ROOT" "$ROOT/tests/gpu" "$ROOT/tests/hgkv/test_kernel.py" --junitxml="$OUT/pytest_gpu.xml" \
    > "$OUT/pytest_gpu.log" 2>&1
PYTEST_RC=$?

BENCH_RC=$BENCH_RC PYTEST_RC=$PYTEST_RC OUT="$OUT" "$PY" - <<'EOF'
import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

out = Path(os.environ["OUT"])
summary = {
    "gpu": (out / "gpu.txt").read_text().strip() if (out / "gpu.txt").exists() else None,
    "bench_rc": int(os.environ["BENCH_RC"]),
    "pytest_rc": int(os.environ["PYTEST_RC"]),
}
try:
    suite = ET.parse(out / "pytest_gpu.xml").getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    summary["pytest"] = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
except Exception as exc:
    summary["pytest"] = {"error": f"{type(exc).__name__}: {exc}"}
try:
    bench = json.loads((out / "bench_kernel.json").read_text())
    summary.update({k: bench.get(k) for k in ("machine", "torch", "triton")})
    per_layer, parity, prefill = bench.get("per_layer", {}), bench.get("parity", {}), bench.get("prefill", {})
    figures, checks = {}, {}
    for key in sorted(per_layer):
        row, par, pre = per_layer[key], parity.get(key, {}), prefill.get(key, {}) if isinstance(prefill, dict) else {}
        best = row.get("kernel_sweep_best") or {}
        figures[key] = {
            "history_tokens": row.get("history_tokens"),
            "default_plan": row.get("default_plan"),
            # device time (CUDA-graph replays, L2 flushed before each call): the figures to compare
            "qkv_proj_ms": row.get("qkv_proj_ms"),
            "reference_per_layer_ms": row.get("reference_ms"),
            "kernel_per_layer_ms": row.get("kernel_ms"),
            "first_version_per_layer_ms": row.get("first_version_ms"),
            "kernel_over_qkv_proj": row.get("kernel_over_qkv_proj"),
            "first_version_over_qkv_proj": row.get("first_version_over_qkv_proj"),
            "reference_over_qkv_proj": row.get("reference_over_qkv_proj"),
            "kernel_sweep_best_plan": best.get("plan"),
            "kernel_sweep_best_ms": best.get("ms"),
            "kernel_sweep_best_over_qkv_proj": best.get("over_qkv_proj"),
            "kernel_warm_l2_ms": row.get("kernel_warm_ms"),
            # eager back-to-back calls (event-timed) and host time per call (Python + launches)
            "kernel_eager_ms": row.get("kernel_eager_ms"),
            "qkv_proj_eager_ms": row.get("qkv_proj_eager_ms"),
            "kernel_host_us": row.get("kernel_host_us"),
            "first_version_host_us": row.get("first_version_host_us"),
            "kernel_do_bench_ms": row.get("kernel_do_bench_ms"),
            "qkv_proj_do_bench_ms": row.get("qkv_proj_do_bench_ms"),
            "frozen_prefill_ms": pre.get("frozen_ms"),
            "server_reference_pct_of_prefill": pre.get("server_reference_pct_of_frozen_prefill"),
            "server_kernel_pct_of_prefill": pre.get("server_kernel_pct_of_frozen_prefill"),
            "transformers_torch_overhead_pct": pre.get("hgkv_torch_overhead_pct"),
            "transformers_kernel_overhead_pct": pre.get("hgkv_triton_overhead_pct"),
            "max_abs_diff_vs_reference": par.get("max_abs_diff_kernel_vs_reference"),
            "max_diff_in_ulps_of_largest_operand": par.get("max_diff_in_ulps_of_largest_operand"),
            "reference_max_abs_err_vs_float64": par.get("reference_max_abs_err_vs_float64"),
            "kernel_max_abs_err_vs_float64": par.get("kernel_max_abs_err_vs_float64"),
            "bound_median_in_half_ulps": par.get("bound_median_in_half_ulps"),
            "errors": {
                name: part.get("error") or part.get("errors")
                for name, part in (("per_layer", row), ("parity", par), ("prefill", pre))
                if isinstance(part, dict) and (part.get("error") or part.get("errors"))
            },
        }
        checks[f"{key}_rounded_once_within_derived_bound"] = par.get("kernel_rounded_once_within_bound")
        checks[f"{key}_parity_within_reference_rounding"] = par.get("kernel_within_reference_rounding")
        checks[f"{key}_untouched_rows_bitwise"] = par.get("untouched_rows_bitwise")
        ulps = par.get("max_diff_in_ulps_of_largest_operand")
        checks[f"{key}_max_diff_le_1_ulp"] = None if ulps is None else ulps <= 1.0
        checks[f"{key}_q_columns_bitwise"] = par.get("q_columns_bitwise")
    four = prefill.get("history_4", {}) if isinstance(prefill, dict) else {}
    for key, row in sorted(per_layer.items()):
        if "kernel_over_qkv_proj" in row:
            checks[f"{key}_kernel_per_layer_le_0.1x_qkv_proj"] = row["kernel_over_qkv_proj"] <= 0.1
        if "kernel_ms" in row and "first_version_ms" in row:
            checks[f"{key}_kernel_faster_than_first_version"] = row["kernel_ms"] < row["first_version_ms"]
    if "server_kernel_pct_of_frozen_prefill" in four:
        checks["server_hgkv_overhead_le_0.3pct_at_4_images"] = four["server_kernel_pct_of_frozen_prefill"] <= 0.3
    summary["figures"], summary["checks"] = figures, checks
    if isinstance(prefill, dict) and "error" in prefill:
        summary["prefill_error"] = prefill["error"]
except Exception as exc:
    summary["bench"] = {"error": f"{type(exc).__name__}: {exc}"}
text = json.dumps(summary, indent=2)
(out / "summary.json").write_text(text + "\n")
print(text)
EOF
