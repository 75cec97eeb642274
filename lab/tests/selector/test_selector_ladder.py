from __future__ import annotations

import json

import numpy as np
import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_lab.selector.ladder import LadderConfig, bootstrap_ci, format_table, run_ladder
from causalcache_memory.selector.onnx_scorer import OnnxScorer


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
        second_pass_share=1.0,  # a quarter of the stand-in states need a distant event: no budget limit
    )
    report = run_ladder(policy, DictArchive(), trajs, learned=OnnxScorer(out), config=cfg)
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
        Proposer(useful), archive, trajs, learned=OnnxScorer(out), no_recency=OnnxScorer(out), config=cfg
    )
    assert set(report["results"]) == {"learned", "rgb", "no_recency"} and not report["skipped"]


def test_ladder_reports_each_split_with_helped_harmed_and_fire_rate(trained):
    import dataclasses

    _, out, _ = trained
    trajs, useful = make_trajectories(8, length=14, seed=33)
    trajs = [
        dataclasses.replace(tr, metadata={"split": "memory_critical" if i % 2 else "control"})
        for i, tr in enumerate(trajs)
    ]
    cfg = LadderConfig(
        budgets=(2,),
        witness="gold",
        bootstrap=100,
        max_states_per_trajectory=4,
        rules=("learned", "learned_paper", "first", "evenly_spaced", "random"),
    )
    report = run_ladder(MarkerPolicy(useful), DictArchive(), trajs, learned=OnnxScorer(out), config=cfg)
    assert set(report["results"]) == set(cfg.rules) and not report["skipped"]
    assert report["learned_settings"]["learned_paper"] == {"min_gain": 0.0, "ood_guard": False}
    for per_b in report["results"].values():
        cell = per_b["2"]
        assert set(cell["splits"]) == {"memory_critical", "control"}
        parts = cell["splits"].values()
        assert sum(p["n_states"] for p in parts) == cell["n_states"] == 32
        assert sum(p["helped"] for p in parts) == cell["helped"]
        assert sum(p["harmed"] for p in parts) == cell["harmed"]
        for p in (cell, *parts):
            assert p["helped"] + p["harmed"] <= p["n_states"]
            assert 0.0 <= p["ood_rate"] <= p["fire_rate"] + p["ood_rate"] <= 2.0
            assert p["fire_rate"] == pytest.approx(1.0 - p["k_profile"].get("0", 0.0))
            if p["fire_rate"] == 0.0:
                assert p["helped"] == p["harmed"] == 0 and p["margin"] == 0.0  # Recent-B everywhere
    # the positional baselines are exact-B sets chosen by position alone: First-B always displaces
    assert report["results"]["first"]["2"]["fire_rate"] == 1.0
    # a threshold can only make the learned rule fire less often than the paper's rule
    assert (
        report["results"]["learned"]["2"]["fire_rate"] <= report["results"]["learned_paper"]["2"]["fire_rate"]
    )
    text = format_table(report)
    assert "memory_criti" in text and "control" in text and "fire=" in text


def test_ladder_and_deployed_allocator_choose_the_same_sets(trained):
    """Every learned rule of the ladder is the deployed SelectorAllocator's decision, state by state (the
    ladder evaluates the dev threshold: ``share_window=None``; the deployment rule is tested on its own)."""
    from causalcache_lab.selector import ladder as ladder_module
    from causalcache_lab.selector.labels import LabelConfig, decision_states
    from causalcache_memory.allocation.base import AllocationContext
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.selector.features import FeatureExtractor

    _, out, _ = trained
    trajs, useful = make_trajectories(6, length=14, seed=44)
    model = OnnxScorer(out)
    swaps = 0
    for min_gain, guard in (("auto", True), (0.0, False)):
        cfg = LadderConfig(budgets=(2, 4), witness="gold", min_gain=min_gain, ood_guard=guard)
        lad = ladder_module._Ladder(MarkerPolicy(useful), DictArchive(), cfg, FeatureExtractor(None))
        ladder_module._setup_rules(lad, ["learned", "learned_paper", "inverted"], model, None)
        deployed = {
            "learned": SelectorAllocator(out, min_gain=min_gain, ood_guard=guard, share_window=None),
            "learned_paper": SelectorAllocator(out, min_gain=0.0, ood_guard=False),
            "inverted": SelectorAllocator(out, min_gain=0.0, ood_guard=False, inverted=True),
        }
        for traj in trajs:
            for budget in cfg.budgets:
                for t in decision_states(traj, budget, LabelConfig(max_states_per_trajectory=None)):
                    trace, witness = traj.trace_at(t), traj.steps[t - 1].action
                    events = lad.extractor(trace, budget, witness)
                    state = ladder_module._State(traj, t, budget, trace, None, witness, events)  # type: ignore[arg-type]
                    for rule, allocator in deployed.items():
                        chosen, ood = ladder_module._choose(rule, lad, state)
                        allocation = allocator.allocate(AllocationContext(trace, budget, witness=witness))
                        assert chosen == allocation.selected, (rule, traj.trajectory_id, t, budget)
                        assert ood == (allocation.info.get("fallback") == "ood")
                        swaps += allocation.k > 0
    assert swaps > 0  # the comparison covers states where the selector displaces a recent step
