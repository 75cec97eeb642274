from __future__ import annotations

import json

import numpy as np
import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_memory.lab.selector.ladder import LadderConfig, bootstrap_ci, format_table, run_ladder
from causalcache_memory.selector.onnx_scorer import OnnxSelector


def test_bootstrap_is_clustered_and_covers_the_mean():
    sums, counts = np.array([1.0, 2.0, 3.0, 10.0]), np.array([1.0, 1.0, 1.0, 2.0])
    mean, (lo, hi) = bootstrap_ci(sums, counts, n=500, seed=0)
    assert mean == pytest.approx(16 / 5) and lo < mean < hi
    assert bootstrap_ci(np.array([2.0]), np.array([4.0]), n=50, seed=0) == (0.5, (0.5, 0.5))


def test_ladder_brackets_the_learned_scorer(trained, tmp_path):
    _, out, _ = trained
    trajs, useful = make_trajectories(10, length=14, seed=21)
    policy = MarkerPolicy(useful)
    cfg = LadderConfig(
        budgets=(2, 4),
        witness="gold",
        bootstrap=300,
        max_states_per_trajectory=4,
        rules=("learned", "random", "rgb", "inverted", "no_recency", "oracle"),
    )
    report = run_ladder(policy, DictArchive(), trajs, learned=OnnxSelector(out), config=cfg)
    res = report["results"]
    assert set(res) == {"learned", "random", "inverted", "oracle"}
    assert "rgb" in report["skipped"] and "no_recency" in report["skipped"]  # no pixels / no ablation model
    for _rule, per_b in res.items():
        for b in ("2", "4"):
            r = per_b[b]
            assert r["ci95"][0] <= r["margin"] <= r["ci95"][1] and r["n_trajectories"] == 10
            assert sum(r["k_profile"].values()) == pytest.approx(1.0)
    for b in ("2", "4"):
        assert res["learned"][b]["ci95"][0] > res["random"][b]["ci95"][1]  # intervals separate
        assert res["inverted"][b]["margin"] < res["learned"][b]["margin"]
        assert res["oracle"][b]["margin"] >= res["learned"][b]["margin"] - 1e-6
    text = format_table(report)
    assert "learned" in text and "B=4" in text
    json.dumps(report)


def test_ladder_with_proposals_and_pixels(trained, tmp_path):
    """Witness = the policy's own pass-1 proposal; RGB similarity reads real archived pixels."""
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.policy import Generation

    _, out, _ = trained
    archive = LocalArchive(tmp_path / "arch")
    trajs, useful = make_trajectories(3, length=12, seed=5, archive=archive)
    gold = {s.screenshot_before: s.action for tr in trajs for s in tr.steps}

    class Proposer(MarkerPolicy):
        def generate(self, prompt):
            return Generation("proposal", gold[prompt.images[-1].sha256])

    cfg = LadderConfig(
        budgets=(2,),
        witness="proposal",
        bootstrap=50,
        max_states_per_trajectory=3,
        rules=("learned", "rgb", "no_recency"),
    )
    report = run_ladder(
        Proposer(useful), archive, trajs, learned=OnnxSelector(out), no_recency=OnnxSelector(out), config=cfg
    )
    assert set(report["results"]) == {"learned", "rgb", "no_recency"} and not report["skipped"]
