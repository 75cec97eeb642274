"""``causalcache bench``: parser, cheap import, runner output and target checks."""

from __future__ import annotations

import json
import math
import subprocess
import sys

from causalcache_lab.bench.runner import BenchSizes, check_targets, format_table, run_benchmarks
from causalcache_memory.cli.main import build_parser, main


def test_bench_subcommand_is_registered() -> None:
    args = build_parser().parse_args(
        ["bench", "--quick", "--json", "out.json", "--scenarios", "archive", "overhead"]
    )
    assert args.quick and args.json == "out.json" and args.scenarios == ["archive", "overhead"]
    assert args.policy == "simulated"


def test_cli_module_import_is_cheap() -> None:
    code = (
        "import sys, causalcache_lab.cli.bench, causalcache_lab.bench; "
        "print([m for m in ('onnxruntime', 'langgraph', 'torch', 'PIL') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_cli_writes_json(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    code = main(
        ["bench", "--quick", "--scenarios", "archive", "--json", str(out), "--workdir", str(tmp_path / "w")]
    )
    assert code == 0
    data = json.loads(out.read_text())
    assert {"archive", "targets", "meta", "skipped"} <= set(data)
    assert data["meta"]["machine"]["nproc"] >= 1
    assert "archive.local" in capsys.readouterr().out


def test_runner_tiny_and_targets(tmp_path) -> None:
    sizes = BenchSizes(overhead_ts=(3,), overhead_episodes=1, overhead_window=0, archive_items=3)
    result = run_benchmarks(scenarios=("overhead",), sizes=sizes, workdir=tmp_path)
    assert set(result["step_overhead_ms"]) >= {"recent4", "naive"}
    assert math.isfinite(result["step_overhead_ms"]["recent4"]["t3"]["p50"])
    targets = result["targets"]
    assert targets["selector_p99_ms.n200"]["met"] is None  # not measured in this run
    assert "step_overhead_ms.recent4.t3" in format_table(result)


def test_check_targets_flags_misses() -> None:
    results = {
        "selector_ms": {"n200": {"p99": 3.0}, "n1000": {"p99": 4.0}},
        "checkpoint_kb_per_step": {"causalcache": 5.0, "causalcache_memory_only": 25.0},
        "checkpoint_info": {"causalcache": {"series_kb": [5.0, 5.0, 5.0, 5.0, 9.0, 9.0, 9.0, 9.0]}},
    }
    targets = check_targets(results)
    assert targets["selector_p99_ms.n200"]["met"] is False
    assert targets["selector_p99_ms.n1000"]["met"] is True
    assert targets["checkpoint_kb_per_step.causalcache"]["met"] is True
    assert targets["checkpoint_growth_flat_late_over_early.causalcache"]["met"] is False
    assert targets["checkpoint_kb_per_step.causalcache_memory_only"]["met"] is False


def test_quick_figures_are_not_judged_against_the_targets() -> None:
    from causalcache_lab.bench.runner import format_table

    targets = {
        "x_ms": {"value": 9.0, "limit": 5.0, "met": False},
        "y_ms": {"value": None, "limit": 1, "met": None},
    }
    full = format_table({"meta": {"quick": False}, "targets": targets})
    quick = format_table({"meta": {"quick": True}, "targets": targets})
    assert "MISSED" in full and "MISSED" not in quick
    assert "not judged at --quick sizes" in quick and "not measured" in quick


def test_the_librarys_own_warnings_are_counted_not_shown(capsys) -> None:
    import logging
    import warnings

    from causalcache_lab.cli.bench import OwnWarnings
    from causalcache_memory.errors import CausalCacheWarning

    with OwnWarnings().silenced() as own:
        warnings.warn("the selector fell back to Recent-B on 20 of 20", CausalCacheWarning, stacklevel=1)
        logging.getLogger("causalcache_memory.decisions.stats").warning("idle on a synthetic trace")
    assert own.count == 2
    assert capsys.readouterr().err == ""
    with warnings.catch_warnings(record=True) as after:  # a warning outside the block is shown again
        warnings.simplefilter("always")
        warnings.warn("shown", CausalCacheWarning, stacklevel=1)
    assert len(after) == 1
