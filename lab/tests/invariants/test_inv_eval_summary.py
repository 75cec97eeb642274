"""Closed-loop summaries are recomputed by hand from the episodes: success per split on the right split,
contrasts with the right sign (treatment − control), the interaction and the per-arm accounting."""

from __future__ import annotations

import math

import pytest

from causalcache_lab.eval.closed_loop import EpisodeOutcome
from causalcache_lab.eval.stats import cluster_bootstrap
from causalcache_lab.eval.summary import (
    SPLITS,
    budget_curve,
    split_rows,
    summarize,
    summarize_arm,
    task_scores,
)

# (split, recent, causalcache, random, blind success) per task; chosen so every split, arm and
# contrast has a different, non-zero value (a swapped sign or split cannot give the same numbers).
# "blind" sorts before "causalcache" and "random"/"recent" after it, so an ``==`` turned into an ordering
# comparison picks up another arm's episodes.
TASKS = {
    "m1": ("memory_critical", 0, 1, 0, 0),
    "m2": ("memory_critical", 0, 1, 1, 0),
    "m3": ("memory_critical", 1, 1, 0, 0),
    "m4": ("memory_critical", 0, 0, 1, 1),
    "c1": ("control", 1, 1, 1, 0),
    "c2": ("control", 1, 1, 0, 1),
    "c3": ("control", 0, 0, 0, 1),
    "c4": ("control", 1, 0, 0, 0),
}
ARMS = ("recent", "causalcache", "random", "blind")


def fresh(text: str) -> str:
    """An equal but distinct string object (names read from JSON or YAML are not interned literals:
    comparing them with ``is`` instead of ``==`` must fail the tests)."""
    return "".join(list(text))


def outcomes() -> list[EpisodeOutcome]:
    out = []
    for a, arm in enumerate(ARMS):
        for i, (task, row) in enumerate(TASKS.items()):
            log = [{"k": (i + a) % 3 if arm != "recent" else 0, "selector_latency_ms": 1.0 + a}]
            if arm == "causalcache":
                fired = i % 2 == 0
                log[0].update(
                    proposal={}, second_pass=fired, pass_latency_ms=[10.5, 31.25] if fired else [10.5]
                )
            else:
                log[0].update(pass_latency_ms=[20.5])
            out.append(
                EpisodeOutcome(
                    task_id=fresh(task),
                    arm=fresh(arm),
                    split=fresh(row[0]),
                    budget=4,
                    success=bool(row[1 + a]),
                    steps=3 + i + a,
                    wall_s=0.5 * (i + 1),
                    log=log,
                )
            )
    return out


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


def success(arm: str, split: str) -> float:
    a = ARMS.index(arm)
    return mean(row[1 + a] for row in TASKS.values() if split == "all" or row[0] == split)


def delta(arm: str, base: str, split: str) -> float:
    return success(arm, split) - success(base, split)


def test_the_fixture_discriminates() -> None:
    """Guard on the test data itself: splits and arms differ, so a swap cannot go unnoticed."""
    for arm in ARMS:
        assert success(arm, "memory_critical") != success(arm, "control")
    for split in SPLITS:
        assert delta("causalcache", "recent", split) != 0
    assert delta("causalcache", "recent", "memory_critical") != -delta("causalcache", "recent", "control")
    for split in SPLITS:
        assert delta("random", "recent", split) != delta("causalcache", "recent", split)

    def interaction(arm: str) -> float:
        return delta(arm, "recent", "memory_critical") - delta(arm, "recent", "control")

    assert interaction("blind") != interaction("causalcache")  # mixing arms would move the interaction


def test_split_rows_keeps_exactly_the_split() -> None:
    rows = outcomes()
    for split in ("memory_critical", "control"):
        kept = split_rows(rows, split)
        assert kept and all(o.split == split for o in kept)
        assert len(kept) == sum(o.split == split for o in rows)
    assert split_rows(rows, "all") == rows


def test_success_per_split_is_the_mean_over_that_split() -> None:
    result = summarize(outcomes(), ARMS)
    for arm in ARMS:
        for split in SPLITS:
            cell = result["arms"][arm][split]
            assert cell["success"] == pytest.approx(success(arm, split))
            assert cell["n"] == (8 if split == "all" else 4)
            low, high = cell["ci95"]
            assert 0.0 <= low <= cell["success"] <= high <= 1.0


def test_contrasts_are_treatment_minus_control_on_the_right_split() -> None:
    result = summarize(outcomes(), ARMS, treatment="causalcache", baseline="recent")
    for split in SPLITS:
        c = result["contrasts"][split]
        assert c["delta"] == pytest.approx(delta("causalcache", "recent", split))
        assert c["n"] == (8 if split == "all" else 4)
        assert c["ci95"][0] <= c["delta"] <= c["ci95"][1]
        for arm in ("causalcache", "random"):
            by_arm = result["contrasts_by_arm"][arm][split]
            assert by_arm["delta"] == pytest.approx(delta(arm, "recent", split))
    assert "recent" not in result["contrasts_by_arm"]
    expected = delta("causalcache", "recent", "memory_critical") - delta("causalcache", "recent", "control")
    assert result["contrasts"]["interaction"]["delta"] == pytest.approx(expected)


def test_contrasts_pair_tasks_by_id_not_by_position() -> None:
    rows = outcomes()
    shuffled = [o for o in rows if o.arm != "recent"] + [o for o in reversed(rows) if o.arm == "recent"]
    a = summarize(rows, ARMS)["contrasts"]
    b = summarize(shuffled, ARMS)["contrasts"]
    for split in SPLITS:
        assert b[split]["delta"] == pytest.approx(a[split]["delta"])
    unpaired = [o for o in rows if not (o.arm == "recent" and o.task_id == "m1")]
    assert summarize(unpaired, ARMS)["contrasts"]["memory_critical"]["n"] == 3


def test_no_contrast_without_both_arms() -> None:
    result = summarize([o for o in outcomes() if o.arm == "random"], ("random",))
    assert result["contrasts"] == {} and result["contrasts_by_arm"] == {}
    result = summarize(outcomes(), ("recent", "random"))  # baseline present, treatment absent
    assert result["contrasts"] == {} and set(result["contrasts_by_arm"]) == {"random"}
    result = summarize(outcomes(), ("causalcache", "random"))  # treatment present, baseline absent
    assert result["contrasts"] == {} and result["contrasts_by_arm"] == {}


def test_the_default_seed_is_0() -> None:
    """Published intervals are reproducible: the default bootstrap seed is part of the contract."""
    rows = [o for o in outcomes() if o.arm == "causalcache"]
    expected = cluster_bootstrap([float(o.success) for o in rows], seed=0)
    assert summarize_arm(rows)["all"]["ci95"] == [expected.low, expected.high]
    assert summarize(rows, ("causalcache",))["arms"]["causalcache"]["all"]["ci95"] == [
        expected.low,
        expected.high,
    ]
    other = cluster_bootstrap([float(o.success) for o in rows], seed=1)
    assert [other.low, other.high] != [expected.low, expected.high]  # the seed matters for these data


def test_missing_log_fields_count_as_zero() -> None:
    """A decision record without ``k`` is a Recent-B step (k=0); one without a selector latency, 0 ms."""
    row = outcomes()[0]
    row.log = [{"pass_latency_ms": [4.0]}, {"k": 2, "selector_latency_ms": 3.0, "pass_latency_ms": [4.0]}]
    s = summarize_arm([row])
    assert s["k_profile"] == {"0": 0.5, "2": 0.5}
    assert s["selector_ms_per_step"] == pytest.approx(1.5)


def test_arm_accounting_is_recomputed_from_the_logs() -> None:
    rows = [o for o in outcomes() if o.arm == "causalcache"]
    s = summarize_arm(rows)
    assert s["all"]["steps_mean"] == pytest.approx(mean(o.steps for o in rows))
    mc = [o for o in rows if o.split == "memory_critical"]
    assert s["memory_critical"]["wall_s_mean"] == pytest.approx(mean(o.wall_s for o in mc))
    ks = [r["k"] for o in rows for r in o.log]
    assert s["k_profile"] == {str(k): ks.count(k) / len(ks) for k in sorted(set(ks))}
    assert sum(s["k_profile"].values()) == pytest.approx(1.0)
    fired = [r["second_pass"] for o in rows for r in o.log]
    assert s["fire_rate"] == pytest.approx(sum(fired) / len(fired)) and 0 < s["fire_rate"] < 1
    assert s["added_model_ms_per_step"] == pytest.approx(31.25 * sum(fired) / len(fired))
    assert s["model_ms_per_step"] == pytest.approx(
        mean(sum(r["pass_latency_ms"]) for o in rows for r in o.log)
    )
    assert s["selector_ms_per_step"] == pytest.approx(2.0)
    single = summarize_arm([o for o in outcomes() if o.arm == "random"])
    assert single["fire_rate"] is None and single["added_model_ms_per_step"] is None
    assert single["model_ms_per_step"] == pytest.approx(20.5)
    assert single["selector_ms_per_step"] == pytest.approx(3.0)


def test_an_empty_split_is_nan_not_zero() -> None:
    rows = [o for o in outcomes() if o.arm == "recent" and o.split == "control"]
    s = summarize_arm(rows)
    assert s["memory_critical"]["n"] == 0 and math.isnan(s["memory_critical"]["success"])
    assert math.isnan(s["memory_critical"]["steps_mean"]) and s["control"]["n"] == 4
    assert summarize_arm([])["k_profile"] == {} and summarize_arm([])["selector_ms_per_step"] is None


def seeded(task: str, split: str, arm: str, successes: list[int], budget: int = 4) -> list[EpisodeOutcome]:
    """One episode per policy seed 0, 1, 2, ... of ``task`` under ``arm``."""
    return [
        EpisodeOutcome(
            fresh(task), fresh(split), fresh(arm), budget, bool(ok), steps=3, wall_s=1.0, seed=seed
        )
        for seed, ok in enumerate(successes)
    ]


def test_a_task_score_is_its_mean_over_seeds() -> None:
    rows = seeded("m1", "memory_critical", "recent", [1, 0, 1]) + seeded(
        "m2", "memory_critical", "recent", [0, 0, 1]
    )
    rows += seeded("c1", "control", "recent", [1, 1, 1])
    assert task_scores(rows) == pytest.approx({"m1": 2 / 3, "m2": 1 / 3, "c1": 1.0})
    cell = summarize_arm(rows)["memory_critical"]
    assert cell["success"] == pytest.approx(0.5) and cell["n"] == 2 and cell["episodes"] == 6
    assert cell["per_seed"] == pytest.approx({"0": 0.5, "1": 0.0, "2": 1.0})
    assert summarize_arm(rows)["all"]["per_seed"] == pytest.approx({"0": 2 / 3, "1": 1 / 3, "2": 1.0})


def test_helped_harmed_and_non_inferiority_count_tasks_with_ties() -> None:
    base = {"c1": [1, 1], "c2": [1, 0], "c3": [0, 0], "c4": [1, 1], "c5": [0, 1]}
    arm = {"c1": [1, 1], "c2": [1, 1], "c3": [0, 1], "c4": [0, 1], "c5": [0, 1]}  # tie, up, up, down, tie
    rows = [o for t, v in base.items() for o in seeded(t, "control", "recent", v)]
    rows += [o for t, v in arm.items() for o in seeded(t, "control", "causalcache", v)]
    result = summarize(rows, ("recent", "causalcache"), ni_margin=0.5)
    control = result["contrasts"]["control"]
    assert (control["helped"], control["harmed"], control["n"]) == (2, 1, 5)
    assert control["delta"] == pytest.approx((0 + 0.5 + 0.5 - 0.5 + 0) / 5)
    assert control["ni_margin"] == 0.5 and control["non_inferior"] is True  # low > -0.5
    strict = summarize(rows, ("recent", "causalcache"), ni_margin=1e-9)["contrasts"]["control"]
    assert strict["non_inferior"] is (strict["ci95"][0] > -1e-9)
    default = summarize(rows, ("recent", "causalcache"))["contrasts"]["control"]
    assert default["ni_margin"] == 0.05
    assert "non_inferior" not in result["contrasts"]["memory_critical"]  # controls only
    assert "non_inferior" not in result["contrasts"]["all"] and "ni_margin" not in result["contrasts"]["all"]
    worse = [o for o in rows if o.arm == "recent"] + [
        EpisodeOutcome(o.task_id, o.split, "causalcache", 4, False, 3, 1.0, seed=o.seed)
        for o in rows
        if o.arm == "recent"
    ]
    bad = summarize(worse, ("recent", "causalcache"), ni_margin=0.05)["contrasts"]["control"]
    assert bad["helped"] == 0 and bad["harmed"] == 4 and bad["non_inferior"] is False


def test_every_arm_but_the_baseline_gets_contrasts_whatever_its_name() -> None:
    rows = outcomes()
    renamed = [
        EpisodeOutcome(o.task_id, o.split, "zeta", o.budget, o.success, o.steps, o.wall_s)
        for o in rows
        if o.arm == "random"
    ]
    result = summarize(rows + renamed, (fresh("recent"), "zeta", "causalcache"))
    assert set(result["contrasts_by_arm"]) == {"zeta", "causalcache"}  # never the baseline against itself
    expected = delta("causalcache", "recent", "memory_critical") - delta("causalcache", "recent", "control")
    assert result["contrasts"]["interaction"]["delta"] == pytest.approx(
        expected
    )  # "zeta" is not the baseline
    assert result["contrasts_by_arm"]["zeta"]["all"]["delta"] == pytest.approx(
        delta("random", "recent", "all")
    )


def test_two_pass_records_without_latencies_count_zero() -> None:
    row = outcomes()[0]
    row.log = [
        {"proposal": {}, "second_pass": False},
        {"proposal": {}, "second_pass": True, "pass_latency_ms": [2.0, 3.5]},
    ]
    s = summarize_arm([row])
    assert s["added_model_ms_per_step"] == pytest.approx(3.5 / 2) and s["model_ms_per_step"] == pytest.approx(
        5.5 / 2
    )
    assert s["fire_rate"] == 0.5 and s["all"]["fire_rate"] == 0.5
    assert s["control"]["fire_rate"] is None  # no control episode


def test_budget_curve_is_the_mean_task_score_per_arm_split_and_budget() -> None:
    rows = seeded("m1", "memory_critical", "recent", [1, 0, 0], budget=1)
    rows += seeded("m1", "memory_critical", "recent", [1, 1, 0], budget=2)
    rows += seeded("c1", "control", "recent", [1, 1, 1], budget=2)
    rows += seeded("m1", "memory_critical", "summary_only", [0, 1], budget=0)
    # arms sorting before and after "recent" at the same budget must not leak into its series
    rows += seeded("m1", "memory_critical", "causalcache", [1, 1, 1], budget=1)
    rows += seeded("m1", "memory_critical", "zeta", [0, 0, 0], budget=1)
    curve = budget_curve(rows, [1, 2, 3], ["recent", "summary_only", "zeta"])
    assert curve["arms"]["zeta"]["memory_critical"] == [0.0, None, None]  # only summary_only is pinned to B=0
    assert curve["budgets"] == [1, 2, 3]
    recent = curve["arms"]["recent"]
    assert recent["memory_critical"] == pytest.approx([1 / 3, 2 / 3, None])
    assert recent["control"][:1] == [None] and recent["control"][1] == pytest.approx(1.0)
    assert recent["all"][0] == pytest.approx(1 / 3) and recent["all"][1] == pytest.approx((2 / 3 + 1) / 2)
    flat = curve["arms"]["summary_only"]  # budget 0 whatever the sweep says
    assert flat["memory_critical"] == pytest.approx([0.5, 0.5, 0.5]) and flat["control"] == [None] * 3


def test_non_inferiority_needs_the_interval_strictly_above_minus_the_margin() -> None:
    """Every control task loses exactly 0.5: the interval is [-0.5, -0.5], which is not above -0.5."""
    rows = []
    for t in ("c1", "c2", "c3"):
        rows += seeded(t, "control", "recent", [1, 1]) + seeded(t, "control", "causalcache", [1, 0])
    control = summarize(rows, ("recent", "causalcache"), ni_margin=0.5)["contrasts"]["control"]
    assert control["ci95"] == [-0.5, -0.5] and control["non_inferior"] is False
    assert summarize(rows, ("recent", "causalcache"), ni_margin=0.51)["contrasts"]["control"]["non_inferior"]


def test_summary_options_are_keyword_only() -> None:
    with pytest.raises(TypeError):
        summarize(outcomes(), ARMS, "causalcache")  # type: ignore[misc]
