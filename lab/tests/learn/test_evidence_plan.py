"""Evidence labels alone at small data (issue 55, item 5): the plan counts the trajectories they label,
so the test-to-dev fold applies as for every source, and the refusal comes before labelling, at the
boundary, naming the count needed."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from causalcache_lab.data.split import trajectory_split
from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_lab.learn import load_learn_config
from causalcache_lab.learn.pipeline import _plan_or_refuse
from causalcache_lab.learn.plan import InsufficientDataError, plan_labels
from causalcache_memory.actions.model import Action

STEPS = 8


def _traj(tid: str) -> Trajectory:
    sha = lambda i: hashlib.sha256(f"{tid}#{i}".encode()).hexdigest()  # noqa: E731
    steps = tuple(
        Step(Action("click", x=0.1 * (i % 9), y=0.5), f"click {i}", sha(i), sha(i + 1), step_id=str(i + 1))
        for i in range(STEPS)
    )
    return Trajectory(tid, "copy the invoice number", "desktop", (1280, 800), steps)


def _by_split(n: int = 400) -> dict[str, list[Trajectory]]:
    out: dict[str, list[Trajectory]] = {"train": [], "dev": [], "test": []}
    for i in range(n):
        tid = f"ep-{i}"
        out[trajectory_split(tid, dev=0.15, test=0.15)].append(_traj(tid))
    return out


def _config(tmp_path: Path, evidence_ids: list[str], need_train: int, need_dev: int):  # type: ignore[no-untyped-def]
    links = {
        "episodes": [
            {"trajectory_id": t, "links": [{"from": "2", "to": "6", "is_critical": True}]}
            for t in evidence_ids
        ]
    }
    (tmp_path / "links.json").write_text(json.dumps(links))
    return load_learn_config(
        None,
        output=str(tmp_path / "out"),
        data={"dataset": str(tmp_path / "unused")},
        sources={"evidence": 1.0},
        evidence={"links": str(tmp_path / "links.json")},
        labels={"budgets": [2], "path_length": 0},
        deploy={"budget": 2},
        train={"min_train_states": need_train, "min_dev_states": need_dev},
    )


def test_evidence_alone_folds_test_into_dev_at_the_boundary_and_refuses_one_short(tmp_path: Path) -> None:
    split = _by_split()
    trajectories = [t for part in split.values() for t in part]  # every recorded episode
    per = plan_labels(trajectories[:1], load_learn_config(None, data={"dataset": "x"}, labels={"budgets": [2]}, deploy={"budget": 2}).labels).states_per_trajectory  # fmt: skip
    assert per > 0
    need_train, need_dev = int(4 * per), int(3 * per)
    # evidence marks 4 train episodes, 1 dev and 2 test: dev short alone, dev + test exactly enough
    chosen = split["train"][:4] + split["dev"][:1] + split["test"][:2]
    summary: dict = {}
    config = _plan_or_refuse(
        _config(tmp_path, [t.trajectory_id for t in chosen], need_train, need_dev), trajectories, summary
    )
    assert summary["plan"]["trajectories"] == {"train": 4, "dev": 3, "test": 0}  # the test split went to dev
    assert summary["splits_folded"]["to"] == [0.7, 0.3, 0.0]
    assert config.train["splits"] == [0.7, 0.3, 0.0]

    # one test episode fewer: dev + test are one trajectory short, so nothing is labelled
    fewer = split["train"][:4] + split["dev"][:1] + split["test"][:1]
    with pytest.raises(InsufficientDataError) as err:
        _plan_or_refuse(
            _config(tmp_path, [t.trajectory_id for t in fewer], need_train, need_dev), trajectories, {}
        )
    message = str(err.value)
    assert f"only the trajectories with evidence entries (6 of {len(trajectories)}" in message
    assert f"calibrating the swap threshold needs {need_dev} dev states, the plan has {int(per)}" in message
    assert "this needs about " in message and "Nothing was labelled" in message


def test_other_sources_still_plan_every_trajectory(tmp_path: Path) -> None:
    split = _by_split(60)
    trajectories = [t for part in split.values() for t in part]
    config = _config(tmp_path, [split["train"][0].trajectory_id], 1, 1)
    config = config.model_copy(update={"sources": {"evidence": 1.0, "teacher_forced": 1.0}})
    summary: dict = {}
    _plan_or_refuse(config, trajectories, summary)
    assert sum(summary["plan"]["trajectories"].values()) == len(trajectories)
