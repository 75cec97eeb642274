"""Trajectory JSON Lines: lossless round trip, and a bad line named by file and line number."""

from __future__ import annotations

import hashlib

import pytest

from causalcache_lab.data import Step, Trajectory, load_trajectories, save_trajectories
from causalcache_memory import Action
from causalcache_memory.errors import TraceError


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def test_round_trip_and_decision_state(tmp_path) -> None:
    steps = tuple(
        Step(
            Action("click", x=0.1 * i, y=0.5, target=f"b{i}"),
            f"r{i}",
            sha(f"x{i}"),
            sha(f"x{i + 1}"),
            app="Shop",
        )
        for i in range(1, 5)
    )
    traj = Trajectory("tr-1", "do it", "mobile", (540, 1170), steps, metadata={"split": "control"})
    path = tmp_path / "t.jsonl"
    assert save_trajectories(path, [traj, traj]) == 2
    loaded = list(load_trajectories(path))
    assert loaded == [traj, traj]
    state = loaded[0].trace_at(3)
    assert state.t == 3 and state.current_screenshot == sha("x3")
    assert state.event(2).summary.endswith("[Shop]")


def test_bad_line_is_named(tmp_path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text('{"trajectory_id": "a"}\n', encoding="utf-8")
    with pytest.raises(TraceError, match=r"t\.jsonl:1: not a valid trajectory record"):
        list(load_trajectories(path))
