"""``causalcache inspect`` on the committed real-format fixtures (issue 51 item 1).

Each fixture (AgentNet, OSWorld, MobileWorld, AndroidControl layouts) is imported with ``causalcache data
import`` and inspected with its stored screen text, without OCR: the per-decision and summary tables print,
the HTML page is written, the Python report holds the same numbers as ``--json``, and what it says it
restored is the evidence the fixture knows.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path

import pytest

from causalcache_lab.inspect import inspect_dataset
from causalcache_memory.archive import LocalArchive
from causalcache_memory.cli.main import main
from causalcache_memory.config import parse_config
from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real_formats"


def _import_args(source: str) -> list[str]:
    root = FIXTURES / source
    if source == "osworld":
        return [str(root / "pyautogui"), "--examples", str(root / "examples")]
    if source == "mobileworld":
        return [str(root), "--metadata", str(root / "metadata.json")]
    if source == "androidcontrol":
        pytest.importorskip("tfrecord")
        return [str(root / "episodes.tfrecord")]
    return [str(root)]


@pytest.fixture(params=["agentnet", "osworld", "mobileworld", "androidcontrol"])
def imported(request, tmp_path, capsys) -> tuple[str, Path]:
    source = request.param
    out = tmp_path / source
    assert main(["data", "import", source, *_import_args(source), "--out", str(out)]) == 0
    capsys.readouterr()
    return source, out


def _texts(source: str) -> str:
    return str(FIXTURES / source / "screen_text.json")


def test_inspect_prints_the_tables_and_writes_the_page(imported, tmp_path, capsys) -> None:
    source, ds = imported
    page = tmp_path / "inspect.html"
    argv = ["inspect", str(ds), "--budget", "4", "--screen-text", _texts(source), "--html", str(page)]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "could swap" in out and "restored" in out and "summary (allocator selector, B = 4)" in out
    report = inspect_dataset(str(ds), parse_config({"budget": 4}))
    total = next(line for line in out.splitlines() if line.startswith("total "))
    assert f"{report.declined} ({report.declined_share:.0%})" in total
    for traj in report.trajectories:
        assert traj.trajectory_id in out
        for d in traj.decisions:  # every decision has a row, with its reason
            assert d.why in out
    html = page.read_text("utf-8")
    archive = LocalArchive(str(ds / "archive"))
    for traj in report.trajectories:  # beside each restored screenshot: the text the selector read
        for d in traj.decisions:
            for e in d.restored:
                text = archive.get_text(traj.screens[e])
                assert text and escape(text[:40]) in html
    assert html.startswith("<!doctype html>") and "http" not in html.replace("http-equiv", "")
    assert (
        html.count('<input type="checkbox"><img src="data:image/')
        >= sum(len(d.restored) > 0 for t in report.trajectories for d in t.decisions)
        > 0
        or report.swapped == 0
    )


def test_python_and_json_give_the_same_numbers(imported, capsys) -> None:
    source, ds = imported
    assert main(["inspect", str(ds), "--budget", "4", "--screen-text", _texts(source), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    report = inspect_dataset(str(ds), parse_config({"budget": 4}))
    got = report.to_dict()
    for key in ("decisions", "could_swap", "declined", "swapped", "far_groups"):
        assert printed[key] == got[key], key
    for traj in report.trajectories:
        assert 0 <= traj.declined <= traj.could_swap <= len(traj.decisions)
        for d in traj.decisions:
            assert len(d.selected) == min(d.budget, d.t - 1)
            assert d.declined == (d.could_swap and d.fallback is not None)
            assert d.swaps == len(d.restored)  # each swap replaced a Recent-B event with an older one
            assert all(e not in d.recent for e in d.restored)
            if d.declined and d.fallback == "ood":
                assert d.ood_group


def test_what_it_restores_at_the_use_step_is_the_known_evidence(imported) -> None:
    source, ds = imported
    texts = json.loads(Path(_texts(source)).read_text("utf-8"))
    report = inspect_dataset(str(ds), parse_config({"budget": 4}), screen_text=texts)
    known = json.loads((FIXTURES / source / "tasks.json").read_text("utf-8"))
    checked = 0
    for traj in report.trajectories:
        task = known[traj.trajectory_id]
        use = next(d for d in traj.decisions if d.action == f"type(text={task['value']!r})")
        shown = {traj.screens[e] for e in use.selected}
        if task["evidence_sha"] is None or use.declined:
            continue
        restored = {traj.screens[e] for e in use.restored}
        assert task["evidence_sha"] in shown, traj.trajectory_id
        assert task["evidence_sha"] in restored or not use.restored
        checked += 1
    assert checked or report.declined_share > 0.5  # only a source whose guard declines checks nothing


def test_a_pilot_where_the_guard_declines_is_told(tmp_path, capsys) -> None:
    """OSWorld's accessibility tables: three short trajectories, every could-swap decision declined by the
    guard before try 2 (the model's guard, its text group); the memory's pilot rule speaks at close and the
    report carries it. With the default guard (try 2: no covariate guard before its refit on 64 of the
    deployment's own decisions) the same pilot is not declined and not warned about."""
    ds = tmp_path / "osworld"
    assert main(["data", "import", "osworld", *_import_args("osworld"), "--out", str(ds)]) == 0
    texts = json.loads(Path(_texts("osworld")).read_text("utf-8"))
    before = {"allocator": "selector", "selector": GUARD_BEFORE_TRY2}
    report = inspect_dataset(str(ds), parse_config({"budget": 4, "allocation": before}), screen_text=texts)
    assert report.could_swap < 20 and report.declined_share > 0.5  # shorter than the idle rule's window
    assert report.far_groups
    assert any(group in w for w in report.warnings for group in report.far_groups)
    default = inspect_dataset(str(ds), parse_config({"budget": 4}), screen_text=texts)
    assert default.could_swap == report.could_swap and default.declined_share <= 0.2
    assert not default.far_groups and not default.warnings


def test_bad_screen_text_is_refused_by_name(imported, tmp_path, capsys) -> None:
    _, ds = imported
    bad = tmp_path / "texts.json"
    bad.write_text("[1, 2]", encoding="utf-8")
    assert main(["inspect", str(ds), "--screen-text", str(bad)]) == 1
    assert "--screen-text" in capsys.readouterr().err


def test_the_configured_allocator_is_the_one_replayed(tmp_path) -> None:
    """allocator: recent never swaps nor declines; --limit replays only the first trajectories."""
    ds = tmp_path / "agentnet"
    assert main(["data", "import", "agentnet", *_import_args("agentnet"), "--out", str(ds)]) == 0
    config = parse_config({"budget": 4, "allocation": {"allocator": "recent"}})
    report = inspect_dataset(str(ds), config, limit=2)
    assert report.allocator == "recent" and len(report.trajectories) == 2
    assert report.could_swap > 0 and report.swapped == 0 and report.declined == 0
    assert all(
        d.why.startswith(("kept Recent-B", "no choice")) for t in report.trajectories for d in t.decisions
    )
