"""Benchmark scenarios: plain functions returning JSON-ready dicts (run by pytest-benchmark and the CLI).

Each ``run_*`` function is one scenario of ``causalcache bench``; :func:`run_benchmarks` runs them all.
Heavy dependencies (onnxruntime, LangGraph, the synthetic world) are imported when a scenario runs.
"""

from causalcache_lab.bench.agent_overhead import run_agent_overhead
from causalcache_lab.bench.archive_io import run_archive_io
from causalcache_lab.bench.checkpoints import run_checkpoint_growth
from causalcache_lab.bench.overhead import run_step_overhead
from causalcache_lab.bench.runner import (
    SCENARIOS,
    BenchSizes,
    check_targets,
    format_table,
    run_benchmarks,
)
from causalcache_lab.bench.screens import make_screenshot, screenshot_pool, unique_variant
from causalcache_lab.bench.selector_latency import run_selector_latency
from causalcache_lab.bench.selector_model import benchmark_selector_model, write_throwaway_selector
from causalcache_lab.bench.selector_world_latency import run_selector_world_latency
from causalcache_lab.bench.two_pass import run_two_pass

__all__ = [
    "SCENARIOS",
    "BenchSizes",
    "benchmark_selector_model",
    "check_targets",
    "format_table",
    "make_screenshot",
    "run_agent_overhead",
    "run_archive_io",
    "run_benchmarks",
    "run_checkpoint_growth",
    "run_selector_latency",
    "run_selector_world_latency",
    "run_step_overhead",
    "run_two_pass",
    "screenshot_pool",
    "unique_variant",
    "write_throwaway_selector",
]
