"""The lab's CLI says what it does (issue 51 item 4): demo --help describes the default world, the
closed loop's progress bar names the arm it is running."""

from __future__ import annotations

import argparse

from causalcache_lab.eval import closed_loop
from causalcache_lab.eval.closed_loop import ClosedLoopSettings
from causalcache_lab.world.splits import resolve_worlds
from causalcache_memory.cli.main import build_parser


def _demo_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["demo"]


def test_demo_help_describes_the_default_worlds() -> None:
    demo = _demo_parser()
    default = next(a.default for a in demo._actions if a.dest == "worlds")
    text = demo.format_help()
    assert f"--worlds {default}" in text
    ids = resolve_worlds(default)
    assert ids[0] in text and ids[-1] in text  # the worlds the demo runs, by id
    tasks = next(a.default for a in demo._actions if a.dest == "tasks")
    assert f"{tasks} tasks" in text


class _Bar:
    def __init__(self) -> None:
        self.postfix = ""
        self.updates = 0

    def set_postfix_str(self, text: str) -> None:
        self.postfix = text

    def update(self, n: int) -> None:
        self.updates += n


def test_the_progress_bar_names_the_running_arm(monkeypatch, tmp_path) -> None:
    bar, seen = _Bar(), []

    def fake_run_job(settings, out, job, policy=None, on_episode=None):
        seen.append((job, bar.postfix))  # what the bar shows while this job runs
        return [object()], None

    monkeypatch.setattr(closed_loop, "run_job", fake_run_job)
    jobs = [("recent", 4, 0), ("causalcache", 4, 0)]
    closed_loop._run_jobs(ClosedLoopSettings(), tmp_path, jobs, None, bar, None)
    assert [postfix for _, postfix in seen] == ["running recent B=4 seed=0", "running causalcache B=4 seed=0"]
    assert bar.updates == 2


def test_the_budget_sweep_at_b0_is_not_warned_about(tmp_path) -> None:
    """The selector arm at B = 0 (the budget sweep's first point) runs as what it is, summary-only: no
    'budget: 0 with the selector' warning from the lab's own run (pytest turns warnings into errors)."""
    import warnings

    from causalcache_lab.eval.world_agent import memory_for
    from causalcache_memory.archive import LocalArchive

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        memory = memory_for("causalcache", 0, None, LocalArchive(str(tmp_path / "a")), None)
    assert memory.config.budget == 0 and memory.config.allocation.allocator == "recent"
