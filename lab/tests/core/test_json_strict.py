"""Strict JSON for other programs: NaN never reaches a file or a ``--json`` print (``_jsonl``)."""

from __future__ import annotations

import json
import math

import pytest

from causalcache_memory._jsonl import finite_json, write_json


def _strict(text: str):
    def refuse(token: str) -> None:
        raise ValueError(f"{token} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_figures_become_null_at_any_depth_and_nothing_else_changes() -> None:
    data = {
        "delta": math.nan,
        "ci": (-math.inf, 0.25),
        "arms": [{"rate": math.inf, "episodes": 0, "ok": True, "name": "selector"}],
        "nested": {"deep": [[math.nan]]},
        "seconds": 1.5,
        "missing": None,
    }
    assert finite_json(data) == {
        "delta": None,
        "ci": [None, 0.25],
        "arms": [{"rate": None, "episodes": 0, "ok": True, "name": "selector"}],
        "nested": {"deep": [[None]]},
        "seconds": 1.5,
        "missing": None,
    }
    assert math.isnan(data["delta"])  # the caller's data is left alone
    with pytest.raises(ValueError, match="NaN is not JSON"):
        _strict(json.dumps(data))  # what plain json.dumps would have written


def test_write_json_is_strict_atomic_and_keeps_other_objects_as_text(tmp_path) -> None:
    path = tmp_path / "summary.json"
    path.write_text('{"old": true}', encoding="utf-8")
    write_json(path, {"b": math.nan, "a": tmp_path, "gate": {"ci": [math.nan, math.nan]}})
    assert _strict(path.read_text(encoding="utf-8")) == {
        "b": None,
        "a": str(tmp_path),
        "gate": {"ci": [None, None]},
    }
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]  # no temporary file left
    write_json(path, {"b": 1, "a": 2}, sort_keys=True)
    assert path.read_text(encoding="utf-8").index('"a"') < path.read_text(encoding="utf-8").index('"b"')


def test_learn_prints_a_summary_read_back_with_null_figures(capsys) -> None:
    # a rerun prints from summary.json / manifests, where a gate without dev groups has null delta and ci
    from causalcache_lab.cli.learn import _print_summary

    model = {
        "seconds": 1.0,
        "up_to_date": True,
        "dev": {"value": None, "oracle": None, "top1": None},
        "calibration": {"min_gain": 0.1, "split": "dev"},
        "ood": {"dev_flagged": None},
        "states": {"train": 40, "dev": 0, "test": 0},
        "init_from": {
            "spec": "bundled",
            "sha256": "0" * 64,
            "loss": "decision",
            "lr": 1e-4,
            "cross_fit": 5,
            "cross_fit_epochs": 4,
            "gate": {"groups": 0, "delta": None, "ci": [None, None], "harmful": False},
            "epochs_fine_tuned": 0,
        },
    }
    summary = {
        "seconds": 2.0,
        "output": "runs/learn",
        "stages": {
            "trajectories": {"kept": 3, "read": 3, "seconds": 0.1, "up_to_date": True},
            "model": model,
        },
        "model": "runs/learn/model/model",
        "deploy": "runs/learn/deploy.yaml",
        "deploy_yaml": "budget: 4\n",
    }
    _print_summary(_strict(json.dumps(finite_json(summary))))
    out = capsys.readouterr().out
    assert "dev: value nan (oracle nan), top-1 nan; min_gain 0.1000" in out
    assert "out-of-fold budgeted gain over the base +nan [+nan, +nan])" in out


def test_numpy_scalars_are_numbers_and_their_nan_is_null() -> None:
    import numpy as np

    from causalcache_memory._jsonl import dumps_json

    text = dumps_json({"f32": np.float32(0.5), "bad": np.float32("nan"), "n": np.int64(3), "x": object})
    assert _strict(text) == {"f32": 0.5, "bad": None, "n": 3.0, "x": str(object)}


def test_demo_and_eval_results_json_are_strict(tmp_path) -> None:
    # results.json of `causalcache demo` / `eval closed-loop`: an arm without episodes has a NaN rate
    from causalcache_lab.cli.demo import write_results

    results = {
        "meta": {"budget": 4, "rate": math.nan},
        "arms": {"recent": {"memory_critical": {"success": math.nan, "n": 0}}},
        "episodes": [],
    }
    path, _ = write_results(results, tmp_path, plots=False)
    data = _strict(path.read_text(encoding="utf-8"))
    assert data["arms"]["recent"]["memory_critical"] == {"success": None, "n": 0}


def test_json_lines_numbers_every_line_and_skips_blank_ones(tmp_path) -> None:
    from causalcache_memory._jsonl import json_lines

    path = tmp_path / "r.jsonl"
    path.write_text('{"a": 1}\n\n   \n{"b": 2}\n{"c": 3}', encoding="utf-8")  # last line without newline
    assert [(n, json.loads(line)) for n, line in json_lines(path)] == [
        (1, {"a": 1}),
        (4, {"b": 2}),
        (5, {"c": 3}),
    ]
