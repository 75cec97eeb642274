"""The reliability table: predicted-gain bins against realised swap success (lab/eval/reliability.py)."""

from __future__ import annotations

import pytest

from causalcache_lab.eval.reliability import (
    decision_rates,
    paired_contrast,
    reliability_table,
    swap_outcomes,
)


def _episode(swaps, evidence, split="memory_critical", arm="causalcache"):  # type: ignore[no-untyped-def]
    return {"arm": arm, "split": split, "budget": 4, "evidence_steps": evidence, "swaps": swaps}


def test_a_swap_is_right_only_when_it_restores_evidence_the_window_lacks():
    episodes = [
        _episode([{"t": 20, "predicted_gain": 0.9, "restored": [5]}], [5]),  # right
        _episode([{"t": 20, "predicted_gain": 0.8, "restored": [6]}], [5]),  # restored the wrong step
        _episode([{"t": 20, "predicted_gain": 0.7, "restored": [5]}], [5, 18]),  # evidence already recent
        _episode([{"t": 20, "predicted_gain": 0.6, "restored": [5]}], [5], split="control"),  # not counted
        _episode([{"t": 20, "predicted_gain": 0.5, "restored": [5]}], [5], arm="random"),  # other arm
    ]
    assert swap_outcomes(episodes) == [(0.9, True), (0.8, False), (0.7, False)]


def test_bins_are_quantiles_of_predicted_gain_with_right_shares():
    swaps = [(g / 10, g >= 6) for g in range(10)]
    rows = reliability_table(swaps, bins=2)
    assert [r["swaps"] for r in rows] == [5, 5]
    assert rows[0]["share"] == 0.0 and rows[1]["share"] == pytest.approx(0.8)
    assert rows[1]["lo"] == 0.5 and rows[1]["ci"][0] < 0.8 < rows[1]["ci"][1]
    assert reliability_table([], bins=4) == []


def test_decision_rates_count_pass_two_and_ood_over_all_decisions():
    eps = [
        {"arm": "causalcache", "split": "control", "second_pass": [True, False, False, False],
         "fallbacks": [None, "ood", None, None]},
    ]  # fmt: skip
    rates = decision_rates(eps)
    assert rates["control"] == {"decisions": 4, "pass2_share": 0.25, "ood_share": 0.25}
    assert rates["memory_critical"]["decisions"] == 0


def test_paired_contrast_pairs_tasks_and_averages_seeds():
    def ep(arm, task, ok, seed):  # type: ignore[no-untyped-def]
        return {"arm": arm, "task_id": task, "split": "memory_critical", "success": ok, "seed": seed}

    eps = [ep("causalcache", "a", True, 0), ep("causalcache", "a", False, 1), ep("random", "a", False, 0)]
    eps += [ep("random", "a", False, 1), ep("causalcache", "b", False, 0), ep("random", "b", True, 0)]
    eps += [ep("causalcache", "c", True, 0)]  # no random run of c: not paired
    c = paired_contrast(eps, "causalcache", "random", "memory_critical")
    assert c["tasks"] == 2 and c["helped"] == 1 and c["harmed"] == 1
    assert c["delta"] == pytest.approx((0.5 - 1.0) / 2)
