"""Replacement-group mining: recurrence, exact-B arms, age and wrong-restore rules, splits, JSONL."""

from __future__ import annotations

import hashlib

import pytest

from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_lab.hgkv.groups import (
    ARMS,
    ReplacementGroup,
    assign_split,
    load_groups,
    mine_groups,
    save_groups,
)
from causalcache_lab.hgkv.synthetic import same_click
from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import recent_b
from causalcache_memory.errors import ConfigError


def _h(i: int) -> str:
    return hashlib.sha256(str(i).encode()).hexdigest()


def _traj(xs: list[float], tid: str = "t0", success: bool = True) -> Trajectory:
    """A trajectory whose step ``s`` clicks at ``x = xs[s-1]``; screens are distinct hashes."""
    steps = tuple(
        Step(Action("click", x=x, y=0.5), f"click {x}", _h(s), _h(s + 1)) for s, x in enumerate(xs, 1)
    )
    return Trajectory(tid, "goal", "desktop", (100, 100), steps, success=success)


def test_mining_finds_the_candidate_before_the_earlier_occurrence() -> None:
    # a_2 = a_9 (x=0.2): candidate j+ = 1 (v_1 = x_2), age 9 - 1 = 8
    traj = _traj([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.2])
    groups, report = mine_groups([traj], budgets=(1, 2, 4), equivalent=same_click)
    assert report.per_budget == {1: 1, 2: 1, 4: 1} and report.recurring == 1
    for g in groups:
        assert (g.t, g.candidate, g.recurrence, g.target) == (9, 1, 2, "click 0.2")
        recent = g.selected("recent")
        assert recent == recent_b(9, g.budget)
        for arm in ARMS:
            assert len(g.selected(arm)) == g.budget
            assert set(g.selected(arm)) >= set(recent_b(9, g.budget - 1))
        assert g.candidate in g.selected("relevant") and g.candidate not in recent
        assert g.wrong in g.selected("wrong") and g.wrong not in recent and g.wrong != g.candidate
        assert 9 - g.wrong >= g.budget + 2  # age-matched: also strictly older than the window
        assert not same_click(traj.steps[g.wrong].action, traj.steps[8].action)  # its next action differs
        assert g.wrong == 2  # nearest in age to the candidate


def test_default_equivalence_is_the_libraries_full_action_equivalence() -> None:
    # 0.205 is within the desktop click radius of 0.2; 0.3 is not
    traj = _traj([0.1, 0.205, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.2])
    groups, _ = mine_groups([traj], budgets=(1,))
    assert [(g.t, g.candidate) for g in groups] == [(9, 1)]
    assert mine_groups([_traj([0.1, 0.3, 0.4, 0.5, 0.6, 0.2])], budgets=(1,))[0] == []


def test_age_and_success_constraints() -> None:
    # a_6 = a_8: candidate j+ = 5, age 3 -> only B = 1 qualifies (age >= B + 2)
    traj = _traj([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.6])
    groups, report = mine_groups(
        [traj, _traj([0.1, 0.1, 0.1, 0.1], "failed", success=False)], equivalent=same_click
    )
    assert report.per_budget == {1: 1, 2: 0, 4: 0} and report.trajectories == 1
    assert groups[0].candidate == 5 and groups[0].selected("relevant") == (5,)


def test_no_wrong_event_drops_the_state() -> None:
    # B = 4 needs age >= 6: only event 1 is old enough, and it is the candidate itself
    traj = _traj([0.1, 0.2, 0.2, 0.2, 0.3, 0.4, 0.2])
    groups, report = mine_groups([traj], budgets=(4,), equivalent=same_click)
    assert groups == [] and report.no_wrong == {4: 1} and report.per_budget == {4: 0}


def test_colour_recall_yield_and_splits(recall_data) -> None:
    groups, report = recall_data["groups"], recall_data["report"]
    assert report.per_budget == {1: 40, 2: 40, 4: 40}
    splits: dict[str, set[str]] = {}
    for g in groups:
        splits.setdefault(g.split, set()).add(g.trajectory_id)
        assert g.split == assign_split(g.trajectory_id)
    assert set(splits) == {"train", "dev", "test"}
    assert not (splits["train"] & splits["dev"]) and not (splits["train"] & splits["test"])
    assert not (splits["dev"] & splits["test"])


def test_splits_are_deterministic_and_validated() -> None:
    ids = [f"traj-{i}" for i in range(400)]
    first = [assign_split(i) for i in ids]
    assert first == [assign_split(i) for i in ids]
    assert 0.6 < first.count("train") / 400 < 0.8
    assert [assign_split(i, salt="x") for i in ids] != first
    with pytest.raises(ConfigError, match="split fractions"):
        assign_split("a", dev=0.6, test=0.5)


def test_groups_round_trip_jsonl(recall_data, tmp_path) -> None:
    path = tmp_path / "groups.jsonl"
    assert save_groups(path, recall_data["groups"]) == 120
    assert list(load_groups(path)) == recall_data["groups"]
    with pytest.raises(ConfigError, match="arm='other'"):
        recall_data["groups"][0].selected("other")
    bad = ReplacementGroup("t", 9, 2, 1, 2, 2, "x", "train").to_dict() | {"version": 9}
    with pytest.raises(ConfigError, match="version 9"):
        ReplacementGroup.from_dict(bad)


def test_importing_hgkv_loads_no_torch() -> None:
    import subprocess
    import sys

    code = (
        "import sys, causalcache_lab.hgkv, causalcache_lab.cli.train_hgkv; "
        "print('torch' in sys.modules, 'transformers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]
