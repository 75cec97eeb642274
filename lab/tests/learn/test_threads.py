"""Recorded threads -> trajectories: one per thread, the deployment archive's own screens, user labels."""

from __future__ import annotations

import json

import pytest

from causalcache_lab.learn.threads import load_success_labels, threads_to_trajectories
from causalcache_memory.archive.local import LocalArchive
from causalcache_memory.errors import ConfigError
from causalcache_memory.trace.store import TraceStore


def test_every_thread_becomes_its_trace(recorded) -> None:
    trajs, report = threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), None)
    assert report.threads == len(recorded.outcomes) == len(trajs)
    assert {t.trajectory_id for t in trajs} == set(recorded.outcomes)
    archive = LocalArchive(recorded.archive)
    for traj in trajs:
        # same screens as the recorded trace, referenced in the deployment archive (nothing copied)
        assert all(sha in archive for sha in traj.screenshots())
        trace = traj.trace_at(len(traj))
        assert len(trace.events) == len(traj) - 1
        assert traj.steps[0].screenshot_before is not None
        width, height = traj.screen_size
        assert traj.platform == ("mobile" if height > width else "desktop")
    before = sorted(p.name for p in recorded.archive.rglob("*") if p.is_file())
    threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), None)
    assert sorted(p.name for p in recorded.archive.rglob("*") if p.is_file()) == before


def test_steps_match_the_stored_chain(recorded) -> None:
    from causalcache_lab.learn.threads import latest_states, open_checkpointer

    states = latest_states(open_checkpointer(str(recorded.checkpointer)))
    trajs, _ = threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), None)
    store = TraceStore(LocalArchive(recorded.archive))
    for traj in trajs:
        trace = store.load_trace(states[traj.trajectory_id]["cc_head"])
        assert [s.action for s in traj.steps] == [e.action for e in trace.events]
        assert [s.screenshot_after for s in traj.steps] == [e.screenshot for e in trace.events]


def test_success_labels_json_csv_and_all(recorded, tmp_path) -> None:
    ids = sorted(recorded.outcomes)
    labels = {ids[0]: False, ids[1]: True}
    path = tmp_path / "success.json"
    path.write_text(json.dumps(labels))
    trajs, report = threads_to_trajectories(
        str(recorded.checkpointer), str(recorded.archive), load_success_labels(path)
    )
    assert {t.trajectory_id: t.success for t in trajs} == labels
    assert len(report.unlabelled) == len(ids) - 2
    csv = tmp_path / "success.csv"
    csv.write_text(f"thread_id,success\n{ids[0]},true\n{ids[2]},0\n")
    assert load_success_labels(csv) == {ids[0]: True, ids[2]: False}
    assert load_success_labels("all") is None


def test_unknown_thread_in_labels_is_refused(recorded, tmp_path) -> None:
    path = tmp_path / "success.json"
    path.write_text(json.dumps({"no-such-thread": True}))
    with pytest.raises(ConfigError, match=r"does not hold.*no-such-thread"):
        threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), load_success_labels(path))


@pytest.mark.parametrize(
    ("name", "text", "match"),
    [
        ("s.csv", "thread_id,success\nx,maybe\n", "success='maybe'"),
        ("s.json", '{"x": "yes"}', "JSON object"),
        ("s.csv", "id,ok\nx,true\n", "thread_id,success"),
        ("s.csv", "id,ok\n", r"^data\.threads\.success: .*needs the header"),  # no rows: still checked
    ],
)
def test_bad_success_files_name_the_problem(tmp_path, name, text, match) -> None:
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=match):
        load_success_labels(path)


def test_missing_checkpointer_names_the_fix(tmp_path) -> None:
    with pytest.raises(ConfigError, match=r"checkpointer.path"):
        threads_to_trajectories(str(tmp_path / "nope.sqlite"), str(tmp_path), None)


def test_threads_say_which_allocator_recorded_them(recorded, thread_recorder, tmp_path) -> None:
    from causalcache_memory.allocation import RandomAllocator, RecentAllocator
    from causalcache_memory.allocation.explore import ExploringAllocator, explores

    trajs, report = threads_to_trajectories(str(recorded.checkpointer), str(recorded.archive), None)
    assert report.to_dict()["allocators"] == {"recent": len(trajs)}
    explorer = ExploringAllocator(RecentAllocator(), RandomAllocator(seed=1), share=0.5, seed=3)
    mixed = thread_recorder(tmp_path, 8, allocation=explorer)
    trajs, report = threads_to_trajectories(str(mixed.checkpointer), str(mixed.archive), None)
    expected = {
        t.trajectory_id: ["random" if explores(t.metadata["episode_id"], share=0.5, seed=3) else "recent"]
        for t in trajs
    }
    assert {t.trajectory_id: t.metadata["allocators"] for t in trajs} == expected
    assert set(report.allocators) == {"random", "recent"}
    assert not any("shadow_disagrees" in t.metadata for t in trajs)  # recorded without shadow decisions
