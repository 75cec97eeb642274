"""AgentNet / OpenCUA loader: pre-action screens, relative PyAutoGUI, dataset-only calls, success."""

from __future__ import annotations

import json

import pytest
from data_builders import screen_number, write_agentnet

from causalcache_lab.data.loaders import DatasetFormatError
from causalcache_lab.data.loaders.agentnet import load_agentnet
from causalcache_memory.actions import Action

CODES = [
    "pyautogui.click(x=0.25, y=0.5)",
    'pyautogui.write(message="naïve café ☕")',
    'pyautogui.moveTo(x=0.1, y=0.2)\npyautogui.dragTo(x=0.6, y=0.7, button="left")',
    'pyautogui.hotkey(["ctrl", "s"])',
    "computer.triple_click(x=0.3, y=0.4)",
    "pyautogui.frobnicate(3)",
    "computer.wait()",
    'computer.terminate(status="success")',
]


def test_actions_timing_and_ids(tmp_path, archive) -> None:
    src = write_agentnet(
        tmp_path / "an",
        [
            {
                "task_id": "task-α",
                "instruction": "Save the file as café",
                "codes": CODES,
                "task_completed": True,
                "indices": [0, 1, 2, 4, 5, 6, 9, 10],  # gaps in the step numbers
                "size": (1000, 500),
            }
        ],
    )
    result = load_agentnet(src, archive)
    (traj,) = result.trajectories
    assert traj.trajectory_id == "task-α" and traj.goal == "Save the file as café" and traj.success
    assert traj.screen_size == (1000, 500) and traj.platform == "desktop"
    steps = traj.steps
    assert [s.step_id for s in steps] == ["0", "1", "2", "4", "5", "6", "9", "10"]
    # relative coordinates are kept as written, whatever the screen size
    assert (steps[0].action.type, steps[0].action.x, steps[0].action.y) == ("click", 0.25, 0.5)
    assert steps[1].action.type == "type" and steps[1].action.text == "naïve café ☕"
    drag = steps[2].action
    assert (drag.type, drag.x, drag.y, drag.x2, drag.y2) == ("drag", 0.1, 0.2, 0.6, 0.7)
    assert steps[3].action.type == "hotkey" and steps[3].action.keys == ("ctrl", "s")
    assert steps[4].action == Action("click", x=0.3, y=0.4, amount=3)  # a triple click
    assert steps[5].unparsed == "pyautogui.frobnicate(3)" and not steps[5].parsed  # kept, not dropped
    assert steps[6].action.type == "wait" and steps[6].parsed
    assert steps[7].action.type == "done" and steps[7].action.status == "success"
    assert result.report.unparsed == 1 and "frobnicate" in result.report.unparsed_examples[0]
    # screens: image k is x_k (before the action); x_{k+1} is the next image; x_{T+1} is not stored
    numbers = [screen_number(archive, s.screenshot_before) for s in steps]
    assert numbers == list(range(8))
    assert [screen_number(archive, s.screenshot_after) for s in steps[:-1]] == list(range(1, 8))
    assert steps[-1].screenshot_after is None and result.report.missing_last_screen == 1
    assert steps[0].instruction == "do step 0" and "## Code:" in steps[0].response
    # the decision state at t = 3 has the two earlier events and the current screen x_3
    trace = traj.trace_at(3)
    assert len(trace) == 2 and trace.current_screenshot == steps[2].screenshot_before
    unparsed_trace = traj.trace_at(7)
    assert unparsed_trace.event(6).summary.startswith("unparsed action:")


def test_success_is_task_completed_not_terminate(tmp_path, archive) -> None:
    src = write_agentnet(
        tmp_path / "an",
        [
            {
                "task_id": "t1",
                "instruction": "x",
                "codes": ["pyautogui.click(x=0.5, y=0.5)", 'computer.terminate(status="success")'],
                "task_completed": False,
            }
        ],
    )
    (traj,) = load_agentnet(src, archive).trajectories
    assert traj.steps[-1].action.status == "success" and traj.success is False


def test_identical_screens_are_stored_once(tmp_path, archive) -> None:
    root = tmp_path / "an"
    src = write_agentnet(
        root, [{"task_id": "t", "instruction": "x", "codes": ["computer.wait()"] * 3, "task_completed": True}]
    )
    images = sorted((root / "images").iterdir())
    for img in images[1:]:
        img.write_bytes(images[0].read_bytes())
    result = load_agentnet(src, archive)
    shas = {s.screenshot_before for s in result.trajectories[0].steps}
    assert len(shas) == 1 and result.report.screens == 1
    assert archive.get_bytes(shas.pop()) == images[0].read_bytes()  # original bytes


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda r: r.pop("traj"), "traj"),
        (lambda r: r["traj"][1].__setitem__("image", "missing.png"), "traj[1].image"),
        (lambda r: r["traj"][0]["value"].__setitem__("code", None), "traj[0].value.code"),
        (lambda r: r.__setitem__("task_completed", "yes"), "task_completed"),
    ],
)
def test_malformed_records_name_file_line_and_field(tmp_path, archive, mutate, field) -> None:
    codes = ["pyautogui.click(x=0.5, y=0.5)"] * 2
    src = write_agentnet(
        tmp_path / "an",
        [
            {"task_id": "ok", "instruction": "x", "codes": codes, "task_completed": True},
            {"task_id": "bad", "instruction": "x", "codes": codes, "task_completed": True},
        ],
    )
    lines = src.read_text(encoding="utf-8").splitlines()
    record = json.loads(lines[1])
    mutate(record)
    lines[1] = json.dumps(record)
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(DatasetFormatError) as info:
        load_agentnet(src, archive)
    assert f"{src}:2" in str(info.value) and repr(field) in str(info.value)


def test_bad_json_line(tmp_path, archive) -> None:
    src = tmp_path / "x.jsonl"
    src.write_text('{"task_id": 1\n', encoding="utf-8")
    with pytest.raises(DatasetFormatError, match=r"x\.jsonl:1: field '<line>': not JSON"):
        load_agentnet(src, archive)


def test_observation_and_reflection_are_kept_as_event_text(tmp_path, archive) -> None:
    """Issue 25: AgentNet's ``observation`` and ``reflection`` texts used to be dropped on import."""
    src = write_agentnet(
        tmp_path,
        [{"task_id": "t", "instruction": "g", "codes": ["computer.wait()"] * 3, "task_completed": True}],
    )
    lines = [json.loads(line) for line in src.read_text().splitlines()]
    for k, step in enumerate(lines[0]["traj"]):
        step["value"]["observation"] = f"The inbox lists order #{k}4\nwith two lines."
        step["value"]["reflection"] = f"Step {k} worked."
    src.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (traj,) = load_agentnet(src, archive).trajectories
    response = traj.steps[1].response
    assert "## Observation:\nThe inbox lists order #14\nwith two lines." in response
    assert "## Reflection:\nStep 1 worked." in response
    assert response.index("## Observation") < response.index("## Reflection") < response.index("## Thought")
    event = traj.trace_at(3).events[1]
    assert event.response == response
    assert "\n" not in event.summary and "#14" not in event.summary  # summaries stay one line, of actions
