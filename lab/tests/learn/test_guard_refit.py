"""``causalcache learn --guard-only`` (issue 55, item 4): the OOD guard refitted on unlabelled recordings.

A black-box desktop agent (1280x800 screens, pixel clicks, accessibility text with positions) whose
states the bundled guard flags: the refit needs no labeller and no success labels, keeps the bundled
scorer and threshold, and its guard accepts the team's fresh states that the bundled guard declined.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("langgraph")
pytest.importorskip("onnx")
sys.path.insert(0, str(Path(__file__).parent))
from scripted import desktop_episodes, desktop_text, record_scripted

from causalcache_lab.learn import load_learn_config
from causalcache_lab.learn.guard_refit import guard_states, run_guard_refit
from causalcache_lab.learn.plan import InsufficientDataError
from causalcache_memory.cli.main import main

BUDGET = 2


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("team")
    recorded = record_scripted(
        root / "rec", desktop_episodes(24, seed=1), budget=BUDGET, screen_text=desktop_text
    )
    fresh = record_scripted(
        root / "fresh", desktop_episodes(8, seed=2), budget=BUDGET, screen_text=desktop_text
    )
    return recorded, fresh


def _config(tmp_path: Path, rec, **extra):  # type: ignore[no-untyped-def]
    threads = {"checkpointer": str(rec.checkpointer), "archive": rec.archive, **extra}
    return load_learn_config(
        None, output=str(tmp_path / "out"), data={"threads": threads}, deploy={"budget": BUDGET}
    )


def _flags(model_path: Path | None, rec) -> np.ndarray:  # type: ignore[no-untyped-def]
    """Whether the model's guard declines each decision of ``rec`` where a swap is possible (judged on every
    decision, as the guard before try 2: the model's guard is what ``learn --guard-only`` refits)."""
    from causalcache_lab.learn.threads import threads_to_trajectories
    from causalcache_memory.archive import open_archive
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.selector.features import FeatureExtractor
    from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

    archive = open_archive(rec.archive)
    allocator = SelectorAllocator(model_path, **GUARD_BEFORE_TRY2)
    extractor = FeatureExtractor(screen_text=archive)
    trajs, _ = threads_to_trajectories(str(rec.checkpointer), archive, None)
    out = []
    for traj in trajs:
        for t, b in guard_states(traj, (BUDGET,)):
            events = extractor(traj.trace_at(t), b, traj.steps[t - 1].action)
            decision = allocator.decide(events, t=t, budget=b, witness=traj.steps[t - 1].action)
            out.append(decision.info.get("fallback") == "ood")
    return np.array(out)


def test_the_refitted_guard_accepts_the_team_states_the_bundled_one_flagged(
    team, tmp_path: Path, capsys
) -> None:
    recorded, fresh = team
    (tmp_path / "success.json").write_text('{"thread-0": true}')  # ignored: a guard needs no success labels
    cfg = _config(tmp_path, recorded, success=str(tmp_path / "success.json"))
    summary = run_guard_refit(cfg)
    guard = summary["guard"]
    assert guard["trajectories"] == 24  # every episode, labelled or not
    assert guard["base_flagged"] >= 0.5  # the bundle's guard declines these screens ...
    assert guard["flagged"] <= 0.05  # ... the refitted one accepts the held-out episodes' states

    model = Path(guard["model"])
    bundled, refitted = _flags(None, fresh), _flags(model, fresh)  # episodes no fit saw
    assert bundled.mean() >= 0.5
    assert refitted.mean() <= 0.15 and (~refitted[bundled]).mean() >= 0.85

    # the scorer and the threshold are the base's; only the guard changed
    from causalcache_memory.selector.allocator import bundled_model_path

    base_meta = json.loads((bundled_model_path().parent / "metadata.json").read_text())
    meta = json.loads((model / "metadata.json").read_text())
    assert (
        meta["calibration"] == base_meta["calibration"] and meta["ood"]["guard"] != base_meta["ood"]["guard"]
    )
    import yaml

    from causalcache_memory.config.loader import parse_config

    deployed = parse_config(yaml.safe_load((tmp_path / "out" / "guard-deploy.yaml").read_text()))
    assert deployed.allocation.allocator == "selector" and deployed.budget == BUDGET
    assert Path(deployed.allocation.selector.model_path) == model.resolve()

    # the CLI: a rerun of the same config is up to date and says what it did
    spec = {"output": str(tmp_path / "out"), "deploy": {"budget": BUDGET},
            "data": {"threads": {"checkpointer": str(recorded.checkpointer), "archive": recorded.archive,
                                 "success": str(tmp_path / "success.json")}}}  # fmt: skip
    (tmp_path / "learn.yaml").write_text(yaml.safe_dump(spec))
    assert main(["learn", "--guard-only", "--config", str(tmp_path / "learn.yaml")]) == 0
    printed = capsys.readouterr().out
    assert "the base's guard flags" in printed and "threshold: the base's" in printed
    assert "stage up to date" in printed


def test_a_recording_too_small_for_the_guard_is_refused_with_the_episodes_needed(
    team, tmp_path: Path
) -> None:
    from causalcache_lab.learn.guard_refit import refit_guard
    from causalcache_lab.learn.threads import threads_to_trajectories

    _, fresh = team
    trajs, _ = threads_to_trajectories(str(fresh.checkpointer), fresh.archive, None)
    with pytest.raises(
        InsufficientDataError,
        match=r"needs \d+ training states, the recording gives \d+ .*record about \d+ episodes",
    ):
        refit_guard(trajs[:4], None, budgets=(BUDGET,), out_dir=tmp_path / "g")
    assert not (tmp_path / "g").exists()
