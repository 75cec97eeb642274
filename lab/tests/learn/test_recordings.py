"""Several recordings read as one dataset (issue 55, item 3): ids namespaced, archives read in place."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("langgraph")
pytest.importorskip("langchain_core")
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
from scripted import record_scripted

from causalcache_lab.learn import load_learn_config, run_learn
from causalcache_lab.learn.agreement import AgreementScorer, make_sampler
from causalcache_lab.learn.pipeline import _open_archive, _trajectory_inputs
from causalcache_lab.selector.label_reference import target_text
from causalcache_memory.allocation.base import make_allocation, recent_b
from causalcache_memory.errors import ConfigError
from causalcache_memory.render.prompt import render_prompt


def _script(tag: str) -> dict[str, list[str]]:
    return {
        f"task {tag} {e}": [f"Action: pyautogui.click({100 + 90 * i + e}, {50 + 60 * i})" for i in range(5)]
        for e in range(3)
    }


@pytest.fixture(scope="module")
def s3():  # type: ignore[no-untyped-def]
    pytest.importorskip("moto")
    pytest.importorskip("s3fs")
    from moto_s3 import MotoS3

    with MotoS3() as server, server.environ():
        yield server


def test_two_recordings_with_colliding_thread_ids_are_one_dataset(tmp_path: Path, s3) -> None:
    # two recorder processes, both naming their threads thread-0..thread-2; the second one's archive on S3
    east = record_scripted(tmp_path / "east", _script("east"))
    west = record_scripted(tmp_path / "west", _script("west"), archive_url=f"s3://{s3.bucket}/west")
    (tmp_path / "west-success.json").write_text('{"thread-0": true, "thread-1": false, "thread-2": true}')
    recordings = [
        {"name": "east", "checkpointer": str(east.checkpointer), "archive": east.archive},
        {
            "name": "west",
            "checkpointer": str(west.checkpointer),
            "archive": west.archive,
            "success": str(tmp_path / "west-success.json"),
        },
    ]
    cfg = load_learn_config(None, output=str(tmp_path / "out"), data={"threads": recordings})
    summary = run_learn(cfg, stop_after="trajectories", progress=False)
    from causalcache_lab.data.trajectory import load_trajectories

    trajs = list(load_trajectories(tmp_path / "out" / "trajectories" / "trajectories.jsonl"))
    ids = sorted(t.trajectory_id for t in trajs)
    assert ids == ["east/thread-0", "east/thread-1", "east/thread-2", "west/thread-0", "west/thread-2"]
    assert {t.metadata["recording"] for t in trajs} == {"east", "west"}
    report = summary["stages"]["trajectories"]["report"]
    assert (
        report["threads"] == 6 and report["converted"] == 6 and report["recordings"]["west"]["successes"] == 2
    )

    # one archive view: every state's prompt reads its screens from the recording that stored them, and
    # the same black-box agent replayed on it agrees with what it did
    archive = _open_archive(cfg)
    scorer = AgreementScorer(
        make_sampler(east.model.model_copy(update={"script": {**_script("east"), **_script("west")}})),
        k=1,
        temperature=None,
    )
    agreed = states = 0
    for traj in trajs:
        for t in range(2, len(traj) + 1):
            allocation = make_allocation(recent_b(t, 2), t=t, budget=2, allocator="label")
            prompt = render_prompt(traj.trace_at(t), allocation).bind(archive)
            agreed += scorer.score([prompt], [target_text(traj, t, "action_json")])[0] == 1.0
            states += 1
    assert states == 5 * 4 and agreed == states
    with pytest.raises(Exception, match="read-only"):
        archive.put(b"x")


def test_one_recording_keeps_its_ids_and_its_identity(tmp_path: Path) -> None:
    rec = record_scripted(tmp_path / "one", _script("one"))
    spec = {"checkpointer": str(rec.checkpointer), "archive": rec.archive}
    cfg = load_learn_config(None, output=str(tmp_path / "out"), data={"threads": spec})
    inputs = _trajectory_inputs(cfg)
    # the identity of a run made before several recordings existed: its stages stay up to date
    assert set(inputs) == {"threads", "heads", "success_digest", "successful_only"}
    assert set(inputs["threads"]) == {"checkpointer", "archive", "success", "platform", "source"}
    run_learn(cfg, stop_after="trajectories", progress=False)
    from causalcache_lab.data.trajectory import load_trajectories

    ids = sorted(
        t.trajectory_id for t in load_trajectories(tmp_path / "out" / "trajectories" / "trajectories.jsonl")
    )
    assert ids == ["thread-0", "thread-1", "thread-2"]


def test_recording_names_must_differ(tmp_path: Path) -> None:
    spec = {"name": "a", "checkpointer": str(tmp_path / "x.sqlite"), "archive": str(tmp_path / "a")}
    cfg = load_learn_config(None, output=str(tmp_path / "out"), data={"threads": [spec, spec]})
    with pytest.raises(ConfigError, match=r"recording name\(s\) \['a'\] given twice"):
        run_learn(cfg, stop_after="trajectories", progress=False)
