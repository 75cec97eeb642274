"""Each ``causalcache bench`` scenario, run once at tiny sizes: structure of the results, never timings."""

from __future__ import annotations

import math

import pytest

from causalcache_lab.bench import (
    run_archive_io,
    run_checkpoint_growth,
    run_selector_latency,
    run_selector_world_latency,
    run_step_overhead,
    run_two_pass,
)

SMALL_SCREEN = (320, 180)  # the CLI uses 1920x1080; the suite keeps normal runs fast


def _finite_stats(stats: dict) -> None:
    assert set(stats) >= {"p50", "p99", "mean", "n"}
    assert stats["n"] > 0
    assert math.isfinite(stats["p50"]) and math.isfinite(stats["p99"])
    assert 0.0 <= stats["p50"] <= stats["p99"]


def test_step_overhead_keys_and_parts(benchmark, tmp_path, selector_model) -> None:
    result = benchmark.pedantic(
        run_step_overhead,
        kwargs=dict(
            ts=(4, 8),
            episodes=1,
            window=1,
            workdir=tmp_path,
            selector_model=selector_model,
            screen=SMALL_SCREEN,
            pool_size=2,
        ),
        rounds=1,
        iterations=1,
    )
    for key in ("step_overhead_ms", "step_overhead_noarchive_ms"):
        assert set(result[key]) == {"recent4", "causalcache", "causalcache_prefetch", "naive"}
        for by_t in result[key].values():
            assert set(by_t) == {"t4", "t8"}
            for stats in by_t.values():
                _finite_stats(stats)
    parts = result["step_breakdown_ms"]
    assert set(parts["causalcache"]["t8"]) == {"allocate", "archive", "record", "render_bind", "thumbnail"}
    assert set(parts["causalcache_prefetch"]["t8"]) == {
        "allocate",
        "archive",
        "record",
        "render_bind",
        "prepare",
    }
    assert set(result["step_cpu_ms"]) == {"recent4", "causalcache", "causalcache_prefetch", "naive"}
    _finite_stats(result["step_cpu_ms"]["causalcache_prefetch"]["t8"])
    assert result["step_overhead_info"]["causalcache_prefetch"]["fallbacks"] == 0
    assert "archive" not in parts["naive"]["t8"]  # the naive agent has no archive write
    # the variant without the archive write is the total minus exactly that part
    total, noarch = (
        result["step_overhead_ms"]["recent4"]["t8"],
        result["step_overhead_noarchive_ms"]["recent4"]["t8"],
    )
    assert noarch["mean"] <= total["mean"]
    assert result["step_overhead_info"]["causalcache"]["fallbacks"] == 0
    nothumb = result["step_overhead_noarchive_nothumbnail_ms"]["causalcache"]["t8"]
    assert nothumb["mean"] <= result["step_overhead_noarchive_ms"]["causalcache"]["t8"]["mean"]
    # building the wire request (B + 1 images read and base64-encoded) is reported, outside the step total
    assert set(result["request_build_ms"]) == {"recent4", "causalcache", "causalcache_prefetch"}
    _finite_stats(result["request_build_ms"]["causalcache"]["t8"])


def test_step_overhead_rejects_unknown_variant() -> None:
    with pytest.raises(ValueError, match="not benchmarked"):
        run_step_overhead(variants=("gpt",))


def test_selector_latency_keys(benchmark, selector_model) -> None:
    result = benchmark.pedantic(
        run_selector_latency,
        kwargs=dict(sizes=(12, 30), repeats=5, selector_model=selector_model),
        rounds=1,
        iterations=1,
    )
    assert set(result["selector_ms"]) == {"n12", "n30"}
    for stats in result["selector_ms"].values():
        _finite_stats(stats)
    for parts in result["selector_breakdown_ms"].values():
        assert 0.0 <= parts["k_mean"] <= 4.0  # exact-B: at most B events replaced
        assert 1.0 <= parts["onnx_calls_mean"] <= 4.0


def test_selector_world_latency_reaches_the_scorer(benchmark, selector_model) -> None:
    result = benchmark.pedantic(
        run_selector_world_latency,
        kwargs=dict(events=40, repeats=5, selector_model=selector_model),
        rounds=1,
        iterations=1,
    )
    assert set(result["selector_world_ms"]) == {"budget", "paper_rule", "full_beam", "budget_witness"}
    assert set(result["selector_world_cpu_ms"]) == set(result["selector_world_ms"])
    for stats in [*result["selector_world_ms"].values(), *result["selector_world_cpu_ms"].values()]:
        _finite_stats(stats)
        assert stats["p50"] <= stats["p95"] <= stats["p99"]
    info = result["selector_world"]
    assert info["trace"]["events"] == 40 and info["trace"]["budget"] == 4
    assert info["full_beam"]["k_mean"] == 4.0  # the beam's worst case: every recent slot swapped
    for variant in ("budget", "paper_rule", "full_beam", "budget_witness"):
        low, high = info[variant]["ood_distance"]
        assert 0.0 < low <= high and info[variant]["ood_threshold"] > 0.0
        assert 1.0 <= info[variant]["onnx_calls_mean"] <= 4.0


def test_selector_world_latency_fails_loudly_when_the_guard_declines(selector_model) -> None:
    from causalcache_lab.bench.selector_world_latency import BenchmarkTraceError

    with pytest.raises(BenchmarkTraceError, match="stopped before the scorer"):
        run_selector_world_latency(events=40, repeats=1, ood_scale=1e-6, selector_model=selector_model)


def test_archive_stores_input_bytes_without_reencoding(benchmark, tmp_path) -> None:
    result = benchmark.pedantic(
        run_archive_io, kwargs=dict(count=6, workdir=tmp_path, screen=SMALL_SCREEN), rounds=1, iterations=1
    )["archive"]
    assert set(result) == {"local", "memory"}
    for backend, r in result.items():
        for key in ("write_mb_s", "read_mb_s", "write_items_s", "read_items_s", "disk_mb"):
            assert math.isfinite(r[key]) and r[key] > 0, (backend, key)
        assert r["stored_equals_input"] is True
        assert r["items"] == 6
    # content-addressed blobs only: the stored bytes are the input bytes (plus tiny retention markers)
    assert result["memory"]["disk_mb"] == result["memory"]["input_mb"]
    assert result["local"]["disk_mb"] == pytest.approx(result["local"]["input_mb"], abs=0.01)
    assert list(tmp_path.glob("raw-*")) == []  # the raw-disk baseline cleans up after itself


def test_checkpoints_hold_no_image_bytes(benchmark, tmp_path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    result = benchmark.pedantic(
        run_checkpoint_growth,
        kwargs=dict(steps=6, workdir=tmp_path, sample_ts=(1, 6), screen=SMALL_SCREEN),
        rounds=1,
        iterations=1,
    )
    info = result["checkpoint_info"]
    for variant in ("causalcache", "causalcache_memory_only"):
        assert info[variant]["final_state_has_image_bytes"] is False
        assert info[variant]["db_blobs_with_image_bytes"] == 0
    assert info["naive"]["final_state_has_image_bytes"] is True
    assert info["naive"]["db_blobs_with_image_bytes"] > 0
    assert set(result["checkpoint_kb_series"]["causalcache"]) == {"t1", "t6"}
    assert len(info["causalcache"]["series_kb"]) == 6
    assert 0 < result["checkpoint_kb_per_step"]["causalcache"] < result["checkpoint_kb_per_step"]["naive"]
    # the memory's own state keys do not grow with the episode: the last step writes what the second did
    memory_only = info["causalcache_memory_only"]["series_kb"]
    assert memory_only[-1] <= memory_only[1] * 1.1
    # the example-shaped CausalCache graph keeps only its latest reply: its state does not grow either
    graph = info["causalcache"]["series_kb"]
    assert graph[-1] <= graph[1] * 1.1
    assert info["causalcache"]["final_state_kb_by_key"]["messages"] < 1.0


def test_two_pass_accounting(benchmark, tmp_path, selector_model) -> None:
    result = benchmark.pedantic(
        run_two_pass,
        kwargs=dict(budgets=(1, 2), episodes=1, max_steps=8, selector_model=selector_model, workdir=tmp_path),
        rounds=1,
        iterations=1,
    )["two_pass"]
    assert set(result) == {"B1", "B2"}
    for r in result.values():
        assert 0.0 <= r["fire_rate"] <= 1.0
        assert r["added_model_ms"] >= 0.0 and r["added_share"] >= 0.0
        assert r["steps"] > 0
        assert (r["added_model_ms"] == 0.0) == (r["fire_rate"] == 0.0)


def test_two_pass_accounting_takes_any_runtime_from_a_config(tmp_path, selector_model) -> None:
    config = tmp_path / "policy.yaml"
    config.write_text("policy:\n  kind: simulated\n  simulated: {seed: 3}\n", encoding="utf-8")
    result = run_two_pass(
        budgets=(1,),
        episodes=1,
        max_steps=6,
        policy=str(config),
        selector_model=selector_model,
        workdir=tmp_path,
    )["two_pass"]
    assert result["B1"]["steps"] > 0
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match="config YAML"):
        run_two_pass(budgets=(1,), episodes=1, policy="nope", selector_model=selector_model, workdir=tmp_path)


def test_agent_overhead_sends_the_same_images_either_way(benchmark, tmp_path) -> None:
    pytest.importorskip("langgraph")
    from causalcache_lab.bench import run_agent_overhead

    result = benchmark.pedantic(
        run_agent_overhead,
        kwargs=dict(steps=7, budget=2, screen=SMALL_SCREEN, target_bytes=20_000, workdir=tmp_path),
        rounds=1,
        iterations=1,
    )
    _finite_stats(result["plain_step_ms"])
    _finite_stats(result["memory_step_ms"])
    assert result["images_per_call"] == {"plain": 3, "memory": 3}  # B + 1 images, decoded, both agents
    calls = result["model_calls_per_step"]  # one call a step, plus the memory's second passes
    assert calls["plain"] == 1.0 and 1.0 <= calls["memory"] <= 2.0
    assert result["steps_measured"] == 7 - 2  # every step after the first B (fewer images then)
    assert math.isclose(
        result["added_ms"], result["memory_step_ms"]["p50"] - result["plain_step_ms"]["p50"], abs_tol=1e-2
    )
    assert result["png_bytes"] > 15_000  # the noise panel makes the PNG as large as asked
    threads = result["step_thread_cpu_ms"]  # the nodes' thread decodes every image it is sent, both agents
    assert threads["plain"] > 0 and threads["memory"] > 0
    assert math.isclose(
        result["added_step_thread_cpu_ms"], threads["memory"] - threads["plain"], abs_tol=1e-2
    )
    kb = result["checkpoint_kb_per_step"]
    assert 0 < kb["first"] <= kb["mean"] <= kb["last"]  # the agent's own messages grow its state
    assert result["screens"] == "noise" and math.isclose(  # each figure rounded to 3 places on its own
        result["added_run_ms_per_step"],
        result["run_ms_per_step"]["memory"] - result["run_ms_per_step"]["plain"],
        abs_tol=2e-3,
    )
    assert result["setup_ms"]["memory"] > 0 and result["setup_ms"]["plain"] > 0


def test_agent_overhead_runs_on_photo_like_screens_and_names_an_unknown_kind(tmp_path) -> None:
    pytest.importorskip("langgraph")
    from causalcache_lab.bench import run_agent_overhead
    from causalcache_lab.bench.agent_overhead import photo_screens

    photo = photo_screens(2, SMALL_SCREEN)
    assert photo[0] != photo[1]  # distinct screens: each step archives new bytes
    result = run_agent_overhead(steps=4, budget=1, screen=SMALL_SCREEN, screens="photo", workdir=tmp_path)
    assert result["screens"] == "photo" and result["images_per_call"] == {"plain": 2, "memory": 2}
    with pytest.raises(ValueError, match="screens='jpeg' is not one of noise, photo"):
        run_agent_overhead(steps=4, screens="jpeg", workdir=tmp_path / "x")
