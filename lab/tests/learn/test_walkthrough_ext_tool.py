"""lab/tools/learn_walkthrough_ext.py: the black-box walkthrough's recording is what `learn` reads (issue 55)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from lab_fixtures import lab_tool

pytest.importorskip("langgraph.checkpoint.sqlite")


@pytest.fixture(scope="module")
def tool():  # type: ignore[no-untyped-def]
    with lab_tool("learn_walkthrough_ext") as module:
        yield module


def test_more_than_300_episodes_is_refused(tool, capsys) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SystemExit) as err:
        tool.main(["web", "--record", "301", "--out", "unused"])
    assert err.value.code == 2
    assert "at most 300" in capsys.readouterr().err


def test_the_labeller_is_the_agent_under_k_seeds(tool) -> None:  # type: ignore[no-untyped-def]
    from causalcache_lab.worlds_ext.policies import NoisyPolicy, SameLinePolicy

    noisy = tool.agent_labeller("noisy", 3)
    assert [type(p) for p in noisy] == [NoisyPolicy] * 3
    assert [p.seed for p in noisy] == [0, 1, 2]
    assert all(isinstance(p, SameLinePolicy) for p in tool.agent_labeller("same-line", 2))


# the memory's own notices under load (a prefetch past its time limit, the idle warning) are not the subject
@pytest.mark.filterwarnings("ignore::causalcache_memory.errors.CausalCacheWarning")
def test_the_recording_is_what_learn_reads(tool, tmp_path) -> None:  # type: ignore[no-untyped-def]
    from causalcache_lab.learn.threads import threads_to_trajectories

    rec = tmp_path / "record"
    summary = tool.record(rec, "web", "noisy", 6, 100)
    success = json.loads((rec / "success.json").read_text())
    with sqlite3.connect(rec / "checkpoints.sqlite") as conn:
        threads = {row[0] for row in conn.execute("select distinct thread_id from checkpoints")}
    assert set(success) == threads and len(threads) == 6
    by = summary["by_allocator"]
    assert sum(by[g][s]["episodes"] for g in by for s in by[g]) == 6
    assert sum(by[g][s]["successes"] for g in by for s in by[g]) == sum(success.values())
    # the screen text the selector reads is the registry's serialisation of the recorded screens, and the
    # recording stored that same text beside each screenshot (what learn and the prompt cap read)
    from causalcache_memory.archive.local import LocalArchive

    text = tool.ext_screen_text()
    archive = LocalArchive(rec / "archive")
    trajectories, _ = threads_to_trajectories(str(rec / "checkpoints.sqlite"), str(rec / "archive"), None)
    shots = [s.screenshot_after for t in trajectories for s in t.steps if s.screenshot_after]
    assert shots and all(text.get_text(h) for h in shots)
    assert all(archive.get_text(h) == text.get_text(h) for h in shots)


def test_the_deployment_sets_the_witness_check_and_the_harness_arm_matches(tool, tmp_path) -> None:  # type: ignore[no-untyped-def]
    import yaml

    src = tmp_path / "deploy.yaml"
    src.write_text(
        yaml.safe_dump({"budget": 4, "allocation": {"selector": {"model_path": "m", "min_gain": 0.5}}})
    )
    path = tool.witness_deploy(str(src), tmp_path / "witness.yaml")
    sel = yaml.safe_load(Path(path).read_text())["allocation"]["selector"]
    assert sel == {"model_path": "m", "min_gain": 0.5, **tool.WITNESS}
    assert tool._deployed(path, tool.WITNESS_ARM) == ("m", 0.5)
    with pytest.raises(ValueError, match="guard settings"):
        tool._deployed(path, "causalcache_witness")  # the deployment is not what that arm runs
    with pytest.raises(ValueError, match="guard settings"):
        tool._deployed(str(src), tool.WITNESS_ARM)  # learn's own YAML has no witness check


def _results(path: Path, seed: int, arms: dict[str, list[bool]]) -> None:
    """A results.json with one memory-critical and one control task per arm (success: mc, control)."""
    episodes = [
        {"task_id": f"web-{seed}-{i}", "split": split, "arm": arm, "budget": 4, "seed": 0, "success": ok}
        for arm, oks in arms.items()
        for i, (split, ok) in enumerate(zip(("memory_critical", "control"), oks, strict=True))
    ]
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps({"meta": {"budget": 4}, "episodes": episodes}))


def test_pooled_contrasts_count_the_tasks_of_every_seed(tool, tmp_path) -> None:  # type: ignore[no-untyped-def]
    base = {"recent": [False, True], "random": [False, False], "causalcache": [False, True]}
    for prefix, seed, learned in (("eval", 200, [True, True]), ("eval-s300", 300, [False, True])):
        _results(tmp_path / f"{prefix}-baselines", seed, {**base, tool.WITNESS_ARM: [True, True]})
        _results(tmp_path / f"{prefix}-guard", seed, {tool.WITNESS_ARM: learned})
    pooled = tool.pool(tmp_path, [200, 300])
    guard = pooled["contrasts"]["guard_vs_recent"]
    assert guard["memory_critical"]["n"] == 2 and guard["control"]["n"] == 2
    assert (guard["memory_critical"]["helped"], guard["memory_critical"]["harmed"]) == (1, 0)
    assert "full_vs_recent" not in pooled["contrasts"]  # no seed evaluated the full learn
