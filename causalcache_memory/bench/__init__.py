"""Benchmark scenarios: plain functions returning JSON-ready dicts (run by pytest-benchmark and the CLI).

Each ``run_*`` function is one scenario of ``causalcache bench``; :func:`run_benchmarks` runs them all.
Heavy dependencies (onnxruntime, LangGraph, the synthetic world) are imported when a scenario runs.
"""

from .archive_io import run_archive_io
from .checkpoints import run_checkpoint_growth
from .overhead import run_step_overhead
from .runner import SCENARIOS, BenchSizes, check_targets, format_table, run_benchmarks
from .screens import make_screenshot, screenshot_pool, unique_variant
from .selector_latency import run_selector_latency
from .selector_model import benchmark_selector_model, write_throwaway_selector
from .two_pass import run_two_pass

__all__ = [
    "SCENARIOS",
    "BenchSizes",
    "benchmark_selector_model",
    "check_targets",
    "format_table",
    "make_screenshot",
    "run_archive_io",
    "run_benchmarks",
    "run_checkpoint_growth",
    "run_selector_latency",
    "run_step_overhead",
    "run_two_pass",
    "screenshot_pool",
    "unique_variant",
    "write_throwaway_selector",
]
