"""Import corruptions of issue 25 that used to pass with exit status 0 and no message: repeated
MobileWorld step ids, per-action coordinate guessing, blobs left by a failed import."""

from __future__ import annotations

import pytest
from data_builders import write_agentnet, write_mobileworld_task

from causalcache_lab.data.dataset import import_dataset
from causalcache_lab.data.loaders import DatasetFormatError
from causalcache_lab.data.loaders.mobileworld import load_mobileworld
from causalcache_memory.actions import parse_action
from causalcache_memory.cli.main import main

PHONE = (360, 780)


def test_mobileworld_repeated_step_ids_are_refused_with_file_and_ids(tmp_path, capsys) -> None:
    actions = [{"action_type": "click", "x": 10 * k, "y": 20} for k in range(1, 5)]
    folder = write_mobileworld_task(tmp_path / "mw", "task", actions, steps=[5, 6, 6, 7])
    out = tmp_path / "ds"
    assert main(["data", "import", "mobileworld", str(tmp_path / "mw"), "--out", str(out)]) == 1
    err = capsys.readouterr().err
    assert str(folder / "traj.json") in err and "duplicate step id(s) '6'" in err
    assert not out.exists()  # nothing half-written


def _taps(points: list[tuple[int, int]]) -> list[dict]:
    return [{"action_type": "click", "x": x, "y": y} for x, y in points]


def test_pixel_trajectory_is_never_read_on_the_grid(tmp_path, archive) -> None:
    """360x780 pixels with a gesture starting below the screenshot (the navigation bar): deciding per
    action read that swipe as the 0-1000 grid; one decision per trajectory reads every point as pixels
    and keeps the off-screen swipe as an unparsed step."""
    points = [(20 + 30 * k, 60 + 60 * k) for k in range(10)]
    swipe = {"action_type": "swipe", "coordinate": [180, 795], "coordinate2": [180, 300]}
    write_mobileworld_task(tmp_path / "mw", "task", [*_taps(points), swipe], size=PHONE)
    result = load_mobileworld(tmp_path / "mw", archive)
    (traj,) = result.trajectories
    assert traj.metadata["coords"] == "absolute" and traj.screen_size == PHONE
    for step, (x, y) in zip(traj.steps, points, strict=False):
        assert (step.action.x, step.action.y) == (x / 359, y / 779)
    assert not traj.steps[-1].parsed and result.report.unparsed == 1
    assert "y=795" in result.report.unparsed_examples[0]


def test_grid_trajectory_is_read_on_the_grid_throughout(tmp_path, archive) -> None:
    """0-1000 grid points on a 360x780 screen: a point that happens to fit the screen used to be read
    as pixels while the others were read on the grid."""
    points = [(300, 500), (800, 900), (900, 100), (450, 950)]
    write_mobileworld_task(tmp_path / "mw", "task", _taps(points), size=PHONE)
    (traj,) = load_mobileworld(tmp_path / "mw", archive).trajectories
    assert traj.metadata["coords"] == "thousand"
    assert [(s.action.x, s.action.y) for s in traj.steps] == [(x / 1000, y / 1000) for x, y in points]
    # the runtime parser reads each action the same way once told the trajectory's system
    for step, action in zip(traj.steps, _taps(points), strict=True):
        assert parse_action(action, screen_size=PHONE, coords=traj.metadata["coords"]) == step.action


def test_no_coordinate_system_fits_names_the_trajectory(tmp_path, archive) -> None:
    write_mobileworld_task(tmp_path / "mw", "task", _taps([(300, 500), (1500, 2000)]), size=PHONE)
    with pytest.raises(DatasetFormatError, match=r"traj\.json: run 0: field 'coords'.*--coords"):
        load_mobileworld(tmp_path / "mw", archive)


def _agentnet(root, *, broken: bool, first_image: int = 0):
    tasks = [
        {"task_id": f"t{k}", "instruction": "g", "codes": ["computer.wait()"] * 3, "task_completed": True}
        for k in range(2)
    ]
    src = write_agentnet(root, tasks, first_image=first_image)
    if broken:  # the second task's last image is missing: the load fails after storing others
        (root / "images" / "t1_2.png").unlink()
    return src


def test_failed_import_leaves_no_blob_behind(tmp_path) -> None:
    from causalcache_memory.archive import open_archive

    out = tmp_path / "ds"
    with pytest.raises(DatasetFormatError, match=r"t1_2\.png"):
        import_dataset("agentnet", _agentnet(tmp_path / "a", broken=True), out)
    assert not out.exists()
    # a failed re-import keeps the dataset already there, and every blob it references
    import_dataset("agentnet", _agentnet(tmp_path / "b", broken=False), out)
    before = sorted(open_archive(out / "archive").iter_hashes())
    manifest = (out / "dataset.json").read_text()
    with pytest.raises(DatasetFormatError):
        import_dataset("agentnet", _agentnet(tmp_path / "c", broken=True, first_image=50), out, force=True)
    assert sorted(open_archive(out / "archive").iter_hashes()) == before and len(before) == 6
    assert (out / "dataset.json").read_text() == manifest
    assert sorted(p.name for p in out.iterdir()) == ["archive", "dataset.json", "trajectories.jsonl"]
