"""OSWorld loader: post-action screens, absolute pixels, DONE/FAIL/WAIT, result.txt, instructions."""

from __future__ import annotations

import json

import pytest
from data_builders import screen_number, write_osworld_example

from causalcache_lab.data.loaders import DatasetFormatError
from causalcache_lab.data.loaders.osworld import load_osworld

OSWORLD_STEPS = [
    (1, "pyautogui.click(319, 179)"),
    (2, "import pyautogui; pyautogui.typewrite('Grüße')"),
    (4, "pyautogui.moveTo(100, 200)\npyautogui.dragTo(639, 359, duration=0.5)"),
    (4, "WAIT"),
    (5, {"action_type": "CLICK", "parameters": {}}),
    (6, "DONE"),
]


def test_pixels_post_action_screens_and_sentinels(tmp_path, archive) -> None:
    root = tmp_path / "results"
    steps = OSWORLD_STEPS
    write_osworld_example(root, "chrome", "ex-1", steps, extra_lines=[{"Error": "VM hiccup"}], result="1.0")
    examples = tmp_path / "evaluation_examples" / "examples" / "chrome"
    examples.mkdir(parents=True)
    (examples / "ex-1.json").write_text(json.dumps({"id": "ex-1", "instruction": "Open Grüße"}))
    result = load_osworld(root, archive, examples=examples.parent)
    (traj,) = result.trajectories
    assert traj.trajectory_id == "ex-1" and traj.goal == "Open Grüße" and traj.success
    assert traj.metadata["domain"] == "chrome" and traj.metadata["model"] == "gpt-x"
    assert traj.metadata["errors"] == ["VM hiccup"] and traj.screen_size == (640, 360)
    s = traj.steps
    assert [x.step_id for x in s] == ["1", "2", "4", "4#2", "5", "6"]  # gaps and repeats kept
    assert s[0].action.type == "click" and s[0].action.x == pytest.approx(319 / 639)
    assert s[0].action.y == pytest.approx(179 / 359)
    assert s[1].action.text == "Grüße"
    assert (s[2].action.type, s[2].action.x2, s[2].action.y2) == ("drag", 1.0, 1.0)
    assert s[3].action.type == "wait"
    assert not s[4].parsed and "CLICK" in s[4].unparsed and result.report.unparsed == 1
    assert s[5].action.type == "done" and s[5].action.status == "success"
    assert s[0].response.startswith("Thought: step 1")
    # the initial screen is not stored; screenshot k is x_{k+1}, the screen after action k
    assert s[0].screenshot_before is None and result.report.missing_first_screen == 1
    assert [screen_number(archive, x.screenshot_after) for x in s] == list(range(100, 106))
    assert [screen_number(archive, x.screenshot_before) for x in s[1:]] == list(range(100, 105))
    with pytest.raises(Exception, match="no current screen"):
        traj.trace_at(1)
    trace = traj.trace_at(3)  # events 1, 2 and the screen after event 2
    assert len(trace) == 2 and trace.current_screenshot == s[1].screenshot_after


def test_failure_missing_instruction_and_duplicate_ids(tmp_path, archive) -> None:
    root = tmp_path / "results"
    write_osworld_example(root, "gimp", "same", [(1, "FAIL")], result="0.0", model="a")
    write_osworld_example(root, "gimp", "same", [(1, "DONE")], result=None, model="b")
    result = load_osworld(root, archive)
    by_model = {t.metadata["model"]: t for t in result.trajectories}
    assert by_model["a"].success is False and by_model["a"].steps[0].action.status == "failure"
    assert by_model["b"].success is False  # no result.txt: counted as failed and noted
    assert by_model["a"].trajectory_id != by_model["b"].trajectory_id  # same example id, two runs
    assert "instruction not available" in by_model["a"].goal
    notes = result.report.notes
    assert notes["missing result.txt (counted as failed)"] == 1
    assert any("instruction" in k for k in notes)


def test_malformed_line_names_file_line_and_field(tmp_path, archive) -> None:
    folder = write_osworld_example(tmp_path / "r", "os", "e", [(1, "DONE"), (2, "DONE")])
    path = folder / "traj.jsonl"
    original = path.read_text()
    lines = original.splitlines()
    bad = json.loads(lines[1])
    del bad["screenshot_file"]
    lines[1] = json.dumps(bad)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DatasetFormatError) as info:
        load_osworld(tmp_path / "r", archive)
    assert f"{path}:2" in str(info.value) and "'screenshot_file'" in str(info.value)
    path.write_text(original)
    (folder / "result.txt").write_text("great\n")
    with pytest.raises(DatasetFormatError, match=r"result\.txt:1: field 'result'"):
        load_osworld(tmp_path / "r", archive)
