"""Decision records keep the learned selector's facts (``INFO_RECORD_KEYS``), the pass-2 share's included."""

from __future__ import annotations

from decision_runs import run

from causalcache_lab.world.sim_policy import SimulatedPolicy
from causalcache_memory.allocation.base import INFO_RECORD_KEYS
from causalcache_memory.config import parse_config
from causalcache_memory.factory import build_controller
from causalcache_memory.selector import SelectorAllocator


def test_records_say_which_threshold_decided_and_what_it_was_compared_with(archive) -> None:
    allocator = SelectorAllocator(ood_guard=False, share_window=5)  # warm-up min(5, 20) = 5 decisions
    ctl = build_controller(
        parse_config({"budget": 2}), policy=SimulatedPolicy(seed=0), archive=archive, allocator=allocator
    )
    ctl.selector_timeout_s = None
    records = run(ctl, archive, 20)
    scored = [r for r in records if "top_gain" in r]
    assert (
        len(scored) >= 10
        and all(
            set(INFO_RECORD_KEYS)
            - {
                "ood_distance",
                "ood_masked",
                "ood_group",
                "ood_groups",
                "ood_refit",
                "shadow_selected",
                "witness_kept",
                "price",
                "mean_b",
            }
            - {"promoted_gain"}  # on swaps only (below)
            <= set(r)
            for r in scored
        )
    )  # no guard (nor a refitted one) here, shadow sets come only with allocation.compare (lab/tests/allocation/test_explore.py), witness_kept only with witness_check, price only with allocation.priced, mean_b only with allocation.mean_b
    assert [r["threshold_from"] for r in scored[:5]] == ["dev"] * 5
    assert {r["threshold_from"] for r in scored[5:]} == {"deployment"}
    for r in scored:  # a swap only when the top gain beat the threshold of that decision
        assert (r["k"] > 0) <= (r["min_gain"] != "inf" and r["top_gain"] > r["min_gain"])


def test_a_swap_records_each_promoted_steps_predicted_gain(archive) -> None:
    """``promoted_gain``: why each restored step was chosen (the report shows it), on swaps only."""
    allocator = SelectorAllocator(ood_guard=False, min_gain=0.0, share_window=None, inverted=True)
    ctl = build_controller(
        parse_config({"budget": 2}), policy=SimulatedPolicy(seed=0), archive=archive, allocator=allocator
    )
    ctl.selector_timeout_s = None
    records = run(ctl, archive, 12)
    swaps = [r for r in records if r["k"] > 0]
    assert swaps, "the inverted scorer at min_gain 0 swaps"
    for r in records:  # each promoted event's first-swap gain, never above the best first swap
        promoted = {str(j) for j in r["selected"] if j not in r["recent"]}
        assert set(r.get("promoted_gain", {})) == promoted
        assert all(g <= r["top_gain"] + 1e-9 for g in r.get("promoted_gain", {}).values())
