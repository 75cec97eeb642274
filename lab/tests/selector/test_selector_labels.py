from __future__ import annotations

import json

import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_lab.selector.labels import LABELS_VERSION, LabelConfig, read_labels, run_labelling
from causalcache_memory.allocation import make_allocation, recent_b
from causalcache_memory.errors import ConfigError
from causalcache_memory.render import render_prompt


@pytest.fixture(autouse=True)
def _trust_test_factories(monkeypatch):
    """The configs here name factories of test modules: trusted as the user would (the environment)."""
    monkeypatch.setenv("CAUSALCACHE_TRUSTED_MODULES", "selector_synth")


@pytest.fixture
def small():
    trajs, useful = make_trajectories(4, length=12, seed=1)
    return trajs, MarkerPolicy(useful)


def test_header_is_versioned_and_records_cover_the_plan(small, tmp_path):
    trajs, policy = small
    path = tmp_path / "l.jsonl"
    counts = run_labelling(policy, DictArchive(), trajs, path, LabelConfig(budgets=(1, 2, 4)), progress=False)
    header, records = read_labels(path)
    assert header["format"] == "causalcache-selector-labels" and header["version"] == LABELS_VERSION
    assert header["labeller"] == "marker-policy" and len(header["config_hash"]) == 16
    assert counts["written"] == counts["planned"] == len(records) > 0
    for rec in records:
        t, b = rec["t"], rec["budget"]
        assert rec["recent"] == list(recent_b(t, b))
        singles = [g for g in rec["groups"] if g["source"] == "singleton"]
        assert singles[0]["out"] == min(rec["recent"])
        assert sorted(singles[0]["cands"]) == [j for j in range(1, t) if j not in rec["recent"]]


def test_interrupted_run_resumes_without_duplicates(small, tmp_path):
    trajs, policy = small
    path = tmp_path / "l.jsonl"
    cfg = LabelConfig(budgets=(2,))
    first = run_labelling(policy, DictArchive(), trajs, path, cfg, progress=False, max_states=5)
    assert first["written"] == 5
    with open(path, "a") as fh:  # a torn write from a crash
        fh.write('{"kind": "state", "key": "tor')
    second = run_labelling(policy, DictArchive(), trajs, path, cfg, progress=False)
    assert second["skipped"] == 5 and second["written"] == second["planned"] - 5
    _, records = read_labels(path)
    keys = [r["key"] for r in records]
    assert len(keys) == len(set(keys)) == second["planned"]
    assert all(line.startswith("{") for line in path.read_text().splitlines())
    third = run_labelling(policy, DictArchive(), trajs, path, cfg, progress=False)
    assert third["written"] == 0


@pytest.mark.parametrize("cut", [1, 20, -2])
def test_a_labels_file_whose_header_was_cut_is_started_again(small, tmp_path, cut):
    """Issue 56, finding 6: a run stopped while writing the header left a file every rerun refused ("is
    empty; it has no header line") until it was deleted by hand. No record follows a cut header, so the
    rerun writes the file again and labels everything."""
    trajs, policy = small
    path = tmp_path / "l.jsonl"
    cfg = LabelConfig(budgets=(2,))
    run_labelling(policy, DictArchive(), trajs, path, cfg, progress=False, max_states=0)
    header_line = path.read_text().splitlines()[0]
    path.write_text(header_line[:cut])  # the crash: part of the header line, no newline
    counts = run_labelling(policy, DictArchive(), trajs, path, cfg, progress=False)
    assert counts["skipped"] == 0 and counts["written"] == counts["planned"] > 0
    header, records = read_labels(path)
    assert header["version"] == LABELS_VERSION and len(records) == counts["planned"]


def test_resuming_with_another_config_is_refused(small, tmp_path):
    trajs, policy = small
    path = tmp_path / "l.jsonl"
    run_labelling(policy, DictArchive(), trajs[:1], path, LabelConfig(budgets=(2,)), progress=False)
    with pytest.raises(ConfigError, match="config hash"):
        run_labelling(policy, DictArchive(), trajs, path, LabelConfig(budgets=(4,)), progress=False)


class Redundant(MarkerPolicy):
    """Two useful screenshots are worth no more than one: a sum of singleton gains would double-count."""

    name = "redundant"


def test_set_utilities_are_fully_rescored_complete_prompts(tmp_path):
    trajs, useful = make_trajectories(6, length=16, seed=4)
    # make two events useful for every target so that multi-swap teacher paths exist
    for traj in trajs:
        for t, step in enumerate(traj.steps, 1):
            if t > 6:
                useful[step.response] = {traj.steps[1].screenshot_after, traj.steps[2].screenshot_after}
    policy = Redundant(useful)
    path = tmp_path / "l.jsonl"
    cfg = LabelConfig(budgets=(4,), path_length=3, path_candidates=4)
    run_labelling(policy, DictArchive(), trajs, path, cfg, progress=False)
    _, records = read_labels(path)
    # every scored prompt carried a complete exact-B history (never a partial set)
    for batch in policy.calls:
        for hist in batch:
            assert len(hist) == len(set(hist)) and len(hist) == 4
    by_id = {t.trajectory_id: t for t in trajs}
    checked = 0
    for rec in records:
        traj = by_id[rec["trajectory_id"]]
        trace = traj.trace_at(rec["t"])
        target = traj.steps[rec["t"] - 1].response
        for g in (g for g in rec["groups"] if g["source"] == "path"):
            assert len(set(g["base"]) - set(rec["recent"])) >= 1  # conditioned on an already-swapped set
            for j, q in zip(g["cands"], g["q"], strict=True):
                full = (set(g["base"]) - {g["out"]}) | {j}
                prompt = render_prompt(
                    trace, make_allocation(sorted(full), t=rec["t"], budget=4, allocator="x")
                )
                fresh = MarkerPolicy(useful).score([prompt.bind(DictArchive())], [target])[0]
                assert q == pytest.approx(fresh, abs=1e-12)
                checked += 1
        for step in rec["path"][1:]:
            prompt = render_prompt(trace, make_allocation(step["set"], t=rec["t"], budget=4, allocator="x"))
            assert step["q"] == pytest.approx(
                MarkerPolicy(useful).score([prompt.bind(DictArchive())], [target])[0]
            )
    assert checked > 0
    # redundancy is visible: the second useful event adds ~nothing although each alone gains ~1
    rec = next(r for r in records if r["t"] > 10 and any(g["source"] == "path" for g in r["groups"]))
    single = {
        j: q - rec["anchor"] for j, q in zip(rec["groups"][0]["cands"], rec["groups"][0]["q"], strict=True)
    }
    assert single[2] > 0.5 and single[3] > 0.5
    both = [g for g in rec["groups"] if g["source"] == "path"]
    assert all(
        q - g["q_base"] < 0.5 for g in both for j, q in zip(g["cands"], g["q"], strict=True) if j in (2, 3)
    )


def test_cli_label_command(tmp_path, monkeypatch):
    from causalcache_memory.cli.main import main

    recipe = tmp_path / "r.yaml"
    out = tmp_path / "labels.jsonl"
    recipe.write_text(
        json.dumps(
            {
                "setup": {"factory": "selector_synth:selector_setup", "kwargs": {"n": 3, "length": 10}},
                "labels": {"output": str(out), "budgets": [2]},
            }
        )
    )
    assert main(["label", "selector", "--recipe", str(recipe), "--no-progress", "--max-states", "4"]) == 0
    assert main(["label", "selector", "--recipe", str(recipe), "--no-progress"]) == 0
    _header, records = read_labels(out)
    assert len({r["key"] for r in records}) == len(records) > 4


def test_all_slots_scores_every_displaceable_recent_slot(small, tmp_path):
    trajs, policy = small
    path = tmp_path / "l.jsonl"
    run_labelling(
        policy,
        DictArchive(),
        trajs[:1],
        path,
        LabelConfig(budgets=(4,), all_slots=True, path_length=0),
        progress=False,
    )
    _, records = read_labels(path)
    for rec in records:
        singles = [g for g in rec["groups"] if g["source"] == "singleton"]
        assert sorted(g["out"] for g in singles) == rec["recent"] and len(rec["path"]) == 1


def test_the_labelling_prompt_cap_is_refused_under_its_old_name() -> None:
    from causalcache_lab.selector.labels import LabelConfig

    old = {"prompt_" + "budget": {}}
    with pytest.raises(ValueError, match=r"prompt_\w+ was renamed prompt_cap"):
        LabelConfig(**old)
    assert LabelConfig(prompt_cap={}).prompt_cap.max_prompts == 10
