"""lab/tools/learn_heldout.py records again from nothing when a recording was interrupted (RESULTS.md 9o)."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from lab_fixtures import lab_tool

ROOT = Path(__file__).resolve().parents[2]

pytest.importorskip("langgraph.checkpoint.sqlite")


@pytest.fixture(scope="module")
def tool():  # type: ignore[no-untyped-def]
    with lab_tool("learn_heldout") as module:
        yield module


def _checkpoints(record: Path) -> int:
    with sqlite3.connect(record / "checkpoints-recent-b4-s0.sqlite") as conn:
        return int(conn.execute("select count(*) from checkpoints").fetchone()[0])


def _record_in_a_process(out: Path) -> str:
    """Record in a process of its own, as a run that is later interrupted and restarted would."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); import learn_heldout as tool; "
        "tool._record(__import__('pathlib').Path(sys.argv[2]), 'devmix-00', 3, None)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(ROOT / "tools"), str(out)],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout


def test_an_interrupted_recording_is_recorded_again_from_nothing(tool, tmp_path) -> None:
    clean, resumed = tmp_path / "clean", tmp_path / "resumed"
    tool._record(clean, "devmix-00", 3, None)
    _record_in_a_process(resumed)
    (resumed / "success.json").unlink()  # as if the run had stopped before writing it
    assert "an interrupted recording" in _record_in_a_process(resumed)
    assert json.loads((resumed / "success.json").read_text()) == json.loads(
        (clean / "success.json").read_text()
    )
    assert _checkpoints(resumed) == _checkpoints(clean)  # no thread continued from an old checkpoint
    with pytest.raises(FileExistsError, match="finished recording"):
        tool._clear_partial(clean)
