"""The *bundled* scorer on fresh tasks it never saw, from the development worlds (the bundle is trained on
the family's training worlds; held-out worlds are only evaluated in RESULTS.md, never in a test that could
steer a choice), each world's simulated policy as labeller, screen text by the world's OCR as deployed in
the lab, every chosen set fully re-scored.

As deployed (calibrated threshold, OOD guard) it fires rarely, never harms a control state more often
than it helps one, and helps memory-critical states more often than it harms them; under the paper's
rule the same scorer's ordering beats Random and RGB similarity, and its negation loses most of that gain
and harms far more states than it helps.
The closed-loop targets (held-out worlds, 3 policy seeds, 240 tasks) are measured in RESULTS.md.
"""

from __future__ import annotations

from causalcache_lab.selector.ladder import LadderConfig, run_ladder
from causalcache_lab.selector.recipe import world_setup
from causalcache_memory.selector.allocator import bundled_model_path
from causalcache_memory.selector.onnx_scorer import OnnxScorer


def test_bundled_scorer_ladder_on_unseen_world_tasks(tmp_path) -> None:
    setup = world_setup(tasks=40, seed=4242, archive=str(tmp_path / "archive"), worlds="dev")
    learned = OnnxScorer(bundled_model_path())
    assert learned.calibrated_min_gain is not None and learned.ood is not None
    rules = ("learned", "learned_paper", "random", "rgb", "inverted", "oracle")
    config = LadderConfig(rules=rules, budgets=(4,), bootstrap=500, max_states_per_trajectory=12)
    report = run_ladder(
        setup["policy"],
        setup["archive"],
        setup["trajectories"],
        learned=learned,
        screen_text=setup["screen_text"],
        config=config,
    )
    res = {rule: per_b["4"] for rule, per_b in report["results"].items()}
    deployed = res["learned"]
    assert deployed["fire_rate"] <= 0.15, deployed  # the paper's rule fires on most states
    assert res["learned_paper"]["fire_rate"] > 3 * deployed["fire_rate"]
    critical, control = deployed["splits"]["memory_critical"], deployed["splits"]["control"]
    assert control["harmed"] <= control["helped"] + 1, control
    assert critical["helped"] > critical["harmed"] and critical["margin"] >= 0.0, critical
    paper = res["learned_paper"]["margin"]
    assert paper > res["random"]["margin"] + 0.05 and paper > res["rgb"]["margin"] + 0.05, res
    inverted = res["inverted"]
    assert inverted["margin"] < paper - 0.05, res  # the scorer's ordering, not position, carries the gain
    assert inverted["splits"]["memory_critical"]["harmed"] > inverted["splits"]["memory_critical"]["helped"]
    assert res["oracle"]["margin"] >= max(paper, deployed["margin"]) - 1e-9
