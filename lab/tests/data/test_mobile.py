"""MobileWorld and AndroidControl loaders: pre-action screens, pixels, app labels, splits from metadata."""

from __future__ import annotations

import json

import pytest
from data_builders import screen_number, write_androidcontrol, write_mobileworld_task

from causalcache_lab.data.loaders import DatasetFormatError
from causalcache_lab.data.loaders.mobileworld import load_mobileworld

MW_ACTIONS = [
    {"action_type": "click", "x": 135, "y": 300},
    {"action_type": "open_app", "app_name": "Messages"},
    {"action_type": "input_text", "text": "订单 #42"},
    {"action_type": "teleport", "where": "moon"},
    {"action_type": "navigate_home"},
    {"action_type": "open_app", "app_name": "Chrome"},
    {"action_type": "answer", "text": "done"},
]


def test_mobileworld_timing_apps_and_split(tmp_path, archive) -> None:
    root = tmp_path / "mw"
    write_mobileworld_task(root, "cross_task", MW_ACTIONS, steps=[1, 2, 3, 5, 6, 7, 8])
    write_mobileworld_task(root, "single_task", MW_ACTIONS[:2], score="score: 0.0", first_image=400)
    write_mobileworld_task(root, "unknown_task", MW_ACTIONS[:1], first_image=450)
    meta = tmp_path / "tasks.json"
    meta.write_text(
        json.dumps(
            [
                {"task_name": "cross_task", "app_names": ["Messages", "Chrome"]},
                {"task_name": "single_task", "app_names": ["Messages"]},
            ]
        )
    )
    result = load_mobileworld(root, archive, metadata=meta)
    by_id = {t.trajectory_id: t for t in result.trajectories}
    cross = by_id["cross_task"]
    assert cross.success and cross.platform == "mobile" and cross.goal == "Send the code to Bob"
    assert (
        cross.metadata["split"] == "memory_critical" and by_id["single_task"].metadata["split"] == "control"
    )
    assert "split" not in by_id["unknown_task"].metadata
    assert by_id["single_task"].success is False
    s = cross.steps
    assert [x.step_id for x in s] == ["1", "2", "3", "5", "6", "7", "8"]
    assert s[0].action.type == "click" and s[0].action.x == pytest.approx(135 / 269)
    assert s[2].action.text == "订单 #42"
    assert not s[3].parsed and "teleport" in s[3].unparsed
    # the app in the foreground when each action was taken; unknown before open_app and after home
    assert [x.app for x in s] == [None, None, "Messages", "Messages", "Messages", None, "Chrome"]
    assert [screen_number(archive, x.screenshot_before) for x in s] == list(range(300, 307))
    assert s[-1].screenshot_after is None
    assert s[0].response.startswith("Thought: step 1")
    assert result.report.notes["no app_names metadata (no memory-critical split)"] == 1


def test_mobileworld_malformed(tmp_path, archive) -> None:
    folder = write_mobileworld_task(tmp_path / "mw", "t", MW_ACTIONS[:2])
    data = json.loads((folder / "traj.json").read_text())
    del data["0"]["traj"][1]["action"]
    (folder / "traj.json").write_text(json.dumps(data))
    with pytest.raises(DatasetFormatError, match=r"traj\.json: field '0\.traj\[1\]\.action': missing"):
        load_mobileworld(tmp_path / "mw", archive)
    write_mobileworld_task(tmp_path / "mw2", "t", MW_ACTIONS[:1], score="points=3")
    with pytest.raises(DatasetFormatError, match=r"result\.txt:1: field 'score'"):
        load_mobileworld(tmp_path / "mw2", archive)


def test_androidcontrol_tfrecord(tmp_path, archive) -> None:
    pytest.importorskip("tfrecord")
    from causalcache_lab.data.loaders.androidcontrol import load_androidcontrol

    path = write_androidcontrol(
        tmp_path / "android_control-00000-of-00001",
        [
            {
                "episode_id": 7,
                "goal": "Share the photo with Émile",
                "actions": [
                    {"action_type": "open_app", "app_name": "Photos"},
                    {"action_type": "click", "x": 107, "y": 0},
                    {"action_type": "scroll", "direction": "down"},
                    "not json at all",
                    {"action_type": "navigate_back"},
                ],
                "instructions": ["open photos", "tap the corner", "scroll", "??", "go back"],
            },
            {"episode_id": 8, "goal": "g", "actions": [{"action_type": "wait"}], "screens": 1},
        ],
    )
    result = load_androidcontrol(path, archive)
    ep, short = result.trajectories
    assert ep.trajectory_id == "7" and ep.goal == "Share the photo with Émile" and ep.success
    assert ep.metadata["success_source"] == "demonstration" and ep.screen_size == (108, 240)
    s = ep.steps
    assert [x.step_id for x in s] == ["0", "1", "2", "3", "4"]
    assert (s[1].action.x, s[1].action.y) == (1.0, 0.0)
    assert s[2].action.type == "scroll" and s[2].action.direction == "down"
    assert not s[3].parsed and s[3].unparsed == "not json at all" and result.report.unparsed == 1
    assert [x.app for x in s] == [None, "Photos", "Photos", "Photos", "Photos"]
    assert s[0].instruction == "open photos"
    # n + 1 screenshots: screenshots[i] is before action i, the last one after the final action
    assert [screen_number(archive, x.screenshot_before) for x in s] == list(range(570, 575))
    assert screen_number(archive, s[-1].screenshot_after) == 575
    assert short.steps[0].screenshot_after is None  # as many screenshots as actions


def test_androidcontrol_missing_goal(tmp_path, archive) -> None:
    pytest.importorskip("tfrecord")
    from tfrecord import example_pb2

    from causalcache_lab.data.loaders.androidcontrol import load_androidcontrol

    path = write_androidcontrol(
        tmp_path / "ac", [{"episode_id": 1, "goal": "", "actions": []}], compress=False
    )
    # rewrite without a goal feature: build one example by hand
    ex = example_pb2.Example()
    ex.features.feature["episode_id"].int64_list.value.append(3)
    from tfrecord.writer import TFRecordWriter

    data = ex.SerializeToString()
    length = len(data).to_bytes(8, "little")
    path.write_bytes(length + TFRecordWriter.masked_crc(length) + data + TFRecordWriter.masked_crc(data))
    with pytest.raises(DatasetFormatError, match=r"ac:1: field 'goal': missing"):
        load_androidcontrol(path, archive)


def test_androidcontrol_without_the_extra_names_it(tmp_path, archive, monkeypatch) -> None:
    import sys

    from causalcache_lab.data.loaders.androidcontrol import load_androidcontrol
    from causalcache_memory.errors import MissingDependencyError

    monkeypatch.setitem(sys.modules, "tfrecord", None)
    with pytest.raises(MissingDependencyError, match=r"causalcache-memory\[androidcontrol\]"):
        load_androidcontrol(tmp_path, archive)
