"""Generic JSONL schema and threads recorded by CausalCache itself."""

from __future__ import annotations

import json
import re

import pytest
from data_builders import png, screen_number

from causalcache_lab.data.loaders import DatasetFormatError
from causalcache_lab.data.loaders.causalcache import load_causalcache
from causalcache_lab.data.loaders.jsonl import load_jsonl
from causalcache_memory.actions import Action


def _write_shots(folder, numbers):
    folder.mkdir(parents=True, exist_ok=True)
    for n in numbers:
        (folder / f"{n}.png").write_bytes(png(n))


def test_generic_jsonl_after_timing_and_coordinate_systems(tmp_path, archive) -> None:
    _write_shots(tmp_path / "shots", range(10, 15))
    record = {
        "trajectory_id": "run-1",
        "goal": "Copy the number into the form",
        "success": True,
        "timing": "after",
        "initial_screenshot": "shots/10.png",
        "coords": "thousand",
        "metadata": {"source": "my-agent"},
        "steps": [
            {
                "step_id": 3,
                "action": "pyautogui.click(500, 250)",
                "screenshot": "shots/11.png",
                "app": "Form",
            },
            {"step_id": 7, "action": {"action": "type", "text": "Ω-42"}, "screenshot": "shots/12.png"},
            {"action": {"type": "click", "x": 0.5, "y": 0.25}, "screenshot": "shots/13.png"},
            {"action": "I am not sure", "response": "I am not sure", "screenshot": "shots/14.png"},
        ],
    }
    src = tmp_path / "logs.jsonl"
    src.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    result = load_jsonl(src, archive)
    (traj,) = result.trajectories
    s = traj.steps
    assert [x.step_id for x in s] == ["3", "7", "2", "3"]
    assert (s[0].action.x, s[0].action.y) == (0.5, 0.25) and s[0].app == "Form" and s[1].app is None
    assert s[1].action.text == "Ω-42" and s[2].action.x == 0.5
    assert not s[3].parsed and result.report.unparsed == 1
    assert [screen_number(archive, x.screenshot_before) for x in s] == [10, 11, 12, 13]
    assert [screen_number(archive, x.screenshot_after) for x in s] == [11, 12, 13, 14]
    assert result.report.missing_first_screen == 0


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"goal": ""}, "goal"),
        ({"timing": "during"}, "timing"),
        ({"steps": [{"action": "DONE", "screenshot": "nope.png"}]}, "steps[0].screenshot"),
        ({"steps": [{"screenshot": "shots/10.png"}]}, "steps[0].action"),
    ],
)
def test_generic_jsonl_errors(tmp_path, archive, change, field) -> None:
    _write_shots(tmp_path / "shots", [10])
    base = {"trajectory_id": "a", "goal": "g", "success": True, "steps": []}
    src = tmp_path / "logs.jsonl"
    src.write_text(json.dumps(base) + "\n" + json.dumps({**base, "trajectory_id": "b", **change}) + "\n")
    with pytest.raises(DatasetFormatError) as info:
        load_jsonl(src, archive)
    assert f"{src}:2" in str(info.value) and repr(field) in str(info.value)


def test_recorded_threads(tmp_path, archive) -> None:
    from causalcache_memory.archive import open_archive
    from causalcache_memory.trace import Trace
    from causalcache_memory.trace.store import TraceStore

    deployed = open_archive(tmp_path / "deployed")
    shots = [deployed.put(png(n)).sha256 for n in range(20, 24)]
    trace = Trace("Reply to Ana", episode_id="thread-9", platform="mobile")
    trace.observe(shots[0])
    trace.record(Action("open_app", text="Mail"), "open Mail", shots[1], app="Home", screen_size=(200, 100))
    trace.record(Action("wait"), "gibberish", shots[2], app="Mail", metadata={"unparsed": True})
    trace.record(Action("click", x=0.1, y=0.2), "click", shots[3], app="Mail", screen_size=(200, 100))
    head = TraceStore(deployed).commit(None, trace)
    manifest = tmp_path / "threads.jsonl"
    manifest.write_text(
        json.dumps({"head": head, "episode_id": "thread-9", "success": True})
        + "\n"
        + json.dumps({"trace": trace.to_dict(), "success": False, "trajectory_id": "copy"})
        + "\n"
    )
    result = load_causalcache(manifest, archive, source_archive=tmp_path / "deployed")
    first, second = result.trajectories
    assert first.trajectory_id == "thread-9" and first.success and second.trajectory_id == "copy"
    assert first.platform == "mobile" and first.goal == "Reply to Ana" and first.screen_size == (200, 100)
    s = first.steps
    assert [x.step_id for x in s] == ["1", "2", "3"] and [x.app for x in s] == ["Home", "Mail", "Mail"]
    assert [screen_number(archive, x.screenshot_before) for x in s] == [20, 21, 22]
    assert [screen_number(archive, x.screenshot_after) for x in s] == [21, 22, 23]
    assert not s[1].parsed and s[1].unparsed == "gibberish" and result.report.unparsed == 2
    manifest.write_text(json.dumps({"head": head}) + "\n")
    with pytest.raises(DatasetFormatError, match=r"threads\.jsonl:1: field 'success'"):
        load_causalcache(manifest, archive, source_archive=tmp_path / "deployed")


@pytest.mark.parametrize(
    ("line", "problem"),
    [("[1, 2]", "a record must be a JSON object"), ("{not json", "not JSON (Expecting property name")],
)
def test_every_jsonl_loader_names_the_file_and_line_of_a_bad_record(tmp_path, archive, line, problem) -> None:
    from causalcache_lab.data.loaders._common import json_objects

    path = tmp_path / "bad.jsonl"
    path.write_text('{"a": 1}\n\n' + line + "\n", encoding="utf-8")
    assert next(json_objects(path)) == (1, {"a": 1})  # blank lines skipped, lines counted from 1
    with pytest.raises(DatasetFormatError, match=rf"bad\.jsonl:3: field '<line>': {re.escape(problem)}"):
        list(json_objects(path))
    path.write_text(line + "\n", encoding="utf-8")  # the loaders read records through it
    for load in (load_jsonl, lambda p, a: load_causalcache(p, a, source_archive=a)):
        with pytest.raises(DatasetFormatError, match=r"bad\.jsonl:1: field '<line>'"):
            load(path, archive)
