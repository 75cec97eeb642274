#!/usr/bin/env bash
# Issue 25's GPU check in one run: the selector-labelling throughput of a 7B-shaped Qwen2.5-VL in bf16
# (lab/tests/gpu/bench_label_throughput.py; docs/LEARN.md "Cost") and every CUDA-marked test of the labelling
# and adapter paths. ~4-5 minutes on one H100/H200, at most 7.
#
#   OUT=/some/dir bash tests/gpu/run_learn_checks.sh          # from the repository root
#
# Runs from the checkout without installing it (tests/gpu/checkout_site.sh) and needs no download: torch
# (CUDA), transformers, pydantic, pillow, numpy, pytest, peft. Each step has its own timeout and status.
# Writes to $OUT (default ./learn-checks): label_throughput.json/.log, pytest_gpu.log/.xml, gpu.txt.
# BENCH_ARGS="--tiny" PYTHON=.venv/bin/python runs the same on CPU (a smoke test; the CUDA tests skip).
set -u
OUT_NAME=learn-checks . "$(dirname "${BASH_SOURCE[0]}")/checkout_site.sh"   # ROOT, OUT, PY; imports from the checkout
unset TRITON_INTERPRET

nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$OUT/gpu.txt" 2>&1 || true

echo "[run_learn_checks] label throughput (timeout 300 s)" >&2
PYTHONUNBUFFERED=1 timeout 300 "$PY" "$ROOT/lab/tests/gpu/bench_label_throughput.py" ${BENCH_ARGS:-} \
    --out "$OUT/label_throughput.json" > "$OUT/label_throughput.log" 2>&1
BENCH_RC=$?

echo "[run_learn_checks] pytest -m gpu (timeout 150 s)" >&2
PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 timeout 150 "$PY" -m pytest -q -p no:cacheprovider -o addopts="-ra" -W default -m gpu \
    --rootdir "$ROOT" "$ROOT/tests/gpu" "$ROOT/tests/hgkv/test_kernel.py" "$ROOT/lab/tests/hgkv/test_train.py" \
    "$ROOT/tests/runtime/test_transformers_policy.py" "$ROOT/tests/runtime/test_vision_cache.py" --junitxml="$OUT/pytest_gpu.xml" > "$OUT/pytest_gpu.log" 2>&1
PYTEST_RC=$?

echo "bench_rc=$BENCH_RC pytest_rc=$PYTEST_RC"
cat "$OUT/gpu.txt"
tail -n 3 "$OUT/pytest_gpu.log"
cat "$OUT/label_throughput.json" 2>/dev/null || tail -n 30 "$OUT/label_throughput.log"
