"""Selector labelling against a fleet (fake SGLang workers behind smg on loopback)."""

from __future__ import annotations

import threading
import time

import pytest

from causalcache_lab.selector.label_fleet import run_labelling_fleet
from causalcache_lab.selector.labels import LabelConfig, read_labels, run_labelling
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import PolicyUnavailableError
from causalcache_memory.runtime.sglang_client import SGLangPolicy

CONFIG = LabelConfig(budgets=(1, 2), path_length=1, path_candidates=2, max_states_per_trajectory=2)


@pytest.fixture(autouse=True)
def _trust_test_factories(monkeypatch):
    """The configs here name factories of test modules: trusted as the user would (the environment)."""
    monkeypatch.setenv("CAUSALCACHE_TRUSTED_MODULES", "scaleout_label_data")


@pytest.fixture(scope="module")
def demos(tmp_path_factory):
    from causalcache_lab.world.expert import generate_demonstrations
    from causalcache_lab.world.tasks import generate_tasks

    archive = LocalArchive(tmp_path_factory.mktemp("label-archive"))
    return archive, generate_demonstrations(generate_tasks(3, seed=3), archive)


def _records(path) -> dict[str, dict]:
    _, records = read_labels(path)
    return {r["key"]: r for r in records}


def test_fleet_labels_equal_sequential_labels_and_spread_over_workers(demos, workers, gateway, tmp_path):
    archive, trajectories = demos
    with SGLangPolicy(workers[0].url, model_name="fake") as direct:
        run_labelling(direct, archive, trajectories, tmp_path / "seq.jsonl", CONFIG, progress=False)
    served_before = [len(w.requests) for w in workers]
    with SGLangPolicy(gateway.url, gateway=True, model_name="fake") as fleet:
        counts = run_labelling_fleet(
            fleet, archive, trajectories, tmp_path / "fleet.jsonl", CONFIG, concurrency=4, progress=False
        )
    seq, par = _records(tmp_path / "seq.jsonl"), _records(tmp_path / "fleet.jsonl")
    assert counts["written"] == len(seq) == len(par) > 0 and counts["failed"] == 0
    assert par == seq  # same labels, whatever order the states finished in
    assert counts["prompts"] == sum(r["prompts_scored"] for r in par.values())
    assert counts["states_per_s"] > 0 and counts["prompts_per_s"] > 0
    served = [len(w.requests) - b for w, b in zip(workers, served_before, strict=True)]
    assert sum(1 for n in served if n > 0) >= 2  # trajectories spread over the fleet


class _Flaky:
    """A policy wrapper: fails the first ``fail`` calls of each listed trajectory, counts concurrency."""

    def __init__(self, inner, fail: dict[str, int]) -> None:
        self.inner, self.fail, self.name = inner, dict(fail), inner.name
        self.lock = threading.Lock()
        self.active = self.peak = 0

    def score(self, prompts, targets):
        episode = prompts[0].prompt.meta.get("episode_id")
        with self.lock:
            self.active += 1
            self.peak = max(self.peak, self.active)
            failing = self.fail.get(episode, 0) > 0
            if failing:
                self.fail[episode] -= 1
        try:
            if failing:
                raise PolicyUnavailableError(f"injected outage for {episode}")
            time.sleep(0.002)  # keep several calls in flight at once
            return self.inner.score(prompts, targets)
        finally:
            with self.lock:
                self.active -= 1


def test_retries_failures_bounded_in_flight_and_resume(demos, workers, tmp_path):
    archive, trajectories = demos
    out = tmp_path / "labels.jsonl"
    first, second, third = (t.trajectory_id for t in trajectories)
    with SGLangPolicy(workers[1].url, model_name="fake") as policy:
        flaky = _Flaky(policy, {first: 1, second: 10**6})  # one outage to retry; one trajectory down
        counts = run_labelling_fleet(
            flaky, archive, trajectories, out, CONFIG, concurrency=3, retries=2, backoff_s=0.0, progress=False
        )
        assert counts["retries"] >= 1
        assert counts["failed"] == sum(1 for k in counts_keys(trajectories) if k.startswith(second))
        assert counts["failed"] > 0 and "injected outage" in counts["errors"][0]
        assert 1 < flaky.peak <= 3  # several states in flight, never more than `concurrency`
        written = _records(out)
        assert not any(k.startswith(second) for k in written)
        assert any(k.startswith(first) for k in written) and any(k.startswith(third) for k in written)
        resumed = run_labelling_fleet(
            policy, archive, trajectories, out, CONFIG, concurrency=2, progress=False
        )
    assert resumed["skipped"] == len(written) and resumed["written"] == counts["failed"]
    assert set(_records(out)) == set(counts_keys(trajectories))  # complete after the resume, no duplicate
    _, records = read_labels(out)
    assert len(records) == len({r["key"] for r in records})


def counts_keys(trajectories) -> list[str]:
    from causalcache_lab.selector.labels import _planned, state_key

    return [state_key(t.trajectory_id, s, b) for t, s, b in _planned(trajectories, CONFIG)]


def test_cli_label_selector_concurrency_flag(gateway, tmp_path, capsys):
    import json

    from causalcache_memory.cli.main import main

    out = tmp_path / "cli.jsonl"
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(
        json.dumps(
            {
                "data": {"factory": "scaleout_label_data:demos", "kwargs": {"archive": str(tmp_path / "a")}},
                "archive": {"url": str(tmp_path / "a")},
                "policy": {
                    "factory": "causalcache_memory.runtime.sglang_client:SGLangPolicy",
                    "kwargs": {"urls": gateway.url, "gateway": True, "model_name": "fake"},
                },
                "labels": {
                    "output": str(out),
                    "budgets": [1],
                    "path_length": 1,
                    "max_states_per_trajectory": 2,
                },
            }
        )
    )
    args = ["label", "selector", "--recipe", str(recipe), "--no-progress", "--concurrency", "4"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "0 failed" in printed and "states/s" in printed
    _, records = read_labels(out)
    assert len(records) > 0
    assert main(args) == 0  # resumed: nothing left to do
    assert "0 new records" in capsys.readouterr().out
