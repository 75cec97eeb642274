"""PNG plots of closed-loop results."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from causalcache_lab.eval.plots import arm_label, ordered_arms, plot_budget_curve, plot_split_bars

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _results(with_curve: bool = True) -> dict:
    arms = {
        arm: {
            split: {"success": s, "ci95": [max(0.0, s - 0.1), min(1.0, s + 0.1)], "n": 10}
            for split, s in (("all", 0.3 + d), ("memory_critical", 0.2 + 2 * d), ("control", 0.4))
        }
        for arm, d in (("recent", 0.0), ("causalcache", 0.1), ("summary_only", -0.1))
    }
    results = {"meta": {"budget": 4, "arms": ["recent", "causalcache", "summary_only"]}, "arms": arms}
    if with_curve:
        results["budget_curve"] = {
            "budgets": [0, 1, 2, 4, 8],
            "arms": {
                "recent": {"all": [0.1, 0.2, 0.25, 0.3, 0.35], "memory_critical": [0.0, 0.1, 0.1, 0.2, 0.3]},
                "causalcache": {
                    "all": [0.1, 0.25, 0.3, 0.4, 0.4],
                    "memory_critical": [0.0, 0.2, 0.3, 0.4, None],
                },
            },
        }
    return results


def test_split_bars_writes_png(tmp_path):
    path = plot_split_bars(_results(), tmp_path / "sub" / "bars.png")
    assert path == tmp_path / "sub" / "bars.png"
    assert path.read_bytes()[:8] == PNG_MAGIC


def test_split_bars_tolerates_partial_cells(tmp_path):
    results = _results()
    results["arms"]["recent"]["control"] = None
    results["arms"]["causalcache"]["all"]["ci95"] = None
    path = plot_split_bars(results, tmp_path / "bars.png")
    assert path is not None and path.read_bytes()[:8] == PNG_MAGIC


def test_budget_curve_writes_png(tmp_path):
    path = plot_budget_curve(_results(), tmp_path / "curve.png")
    assert path is not None and path.read_bytes()[:8] == PNG_MAGIC


def test_missing_data_returns_none(tmp_path):
    assert plot_budget_curve(_results(with_curve=False), tmp_path / "c.png") is None
    bad = _results()
    bad["budget_curve"]["arms"] = {"recent": {"all": [0.1, 0.2]}}  # wrong length: no usable series
    assert plot_budget_curve(bad, tmp_path / "c.png") is None
    assert plot_split_bars({"arms": {}}, tmp_path / "b.png") is None
    assert plot_split_bars({"arms": {"recent": {"all": {"success": None}}}}, tmp_path / "b.png") is None
    assert not (tmp_path / "b.png").exists() and not (tmp_path / "c.png").exists()


def test_labels_and_order():
    results = {
        "meta": {"arms": ["causalcache", "recent"]},
        "arms": {"recent": {}, "rgb": {}, "causalcache": {}},
    }
    assert ordered_arms(results) == ["causalcache", "recent", "rgb"]
    assert arm_label("recent", 4) == "Recent-4" and arm_label("mystery") == "mystery"
