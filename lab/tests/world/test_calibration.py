from __future__ import annotations

from causalcache_lab.world import (
    EVIDENCE_KEY,
    EvidenceOracleAllocator,
    SimulatedPolicy,
    calibrate,
    generate_tasks,
    run_episode,
)
from causalcache_memory.allocation import RecentAllocator, SummaryOnlyAllocator


def test_run_episode_records_a_trace_with_evidence_ground_truth(archive):
    task = next(t for t in generate_tasks(10, seed=2) if t.split == "memory_critical")
    result = run_episode(task, EvidenceOracleAllocator(), SimulatedPolicy(), archive, budget=4)
    assert result.steps == len(result.trace) and result.steps <= len(task.steps) + 6
    assert any(e.metadata[EVIDENCE_KEY] for e in result.trace)
    assert all(a.budget == 4 for a in result.allocations)
    assert result.to_dict()["task_id"] == task.task_id


def test_calibration_orders_the_arms_on_memory_critical_tasks(archive):
    tasks = generate_tasks(24, seed=9)
    report = calibrate(
        tasks,
        SimulatedPolicy(),
        archive,
        budget=4,
        arms={
            "summary_only": SummaryOnlyAllocator,
            "recent": RecentAllocator,
            "oracle": EvidenceOracleAllocator,
        },
    )
    # without any history image only a lucky pick of a person can succeed (about 1 in 6 names on screen)
    assert report["summary_only"]["memory_critical"] <= 0.2
    assert report["oracle"]["memory_critical"] > report["recent"]["memory_critical"]
    assert report["oracle"]["memory_critical"] > report["summary_only"]["memory_critical"] + 0.3
    assert report["oracle"]["control"] > 0.5


def test_works_with_the_local_archive(tmp_path):
    from causalcache_lab.world import generate_demonstrations
    from causalcache_memory.archive import LocalArchive

    archive = LocalArchive(tmp_path / "shots")
    task = next(t for t in generate_tasks(6, seed=4, platform="desktop") if t.split == "memory_critical")
    (traj,) = generate_demonstrations([task], archive)
    assert all(s.screenshot_after in archive for s in traj.steps)
    result = run_episode(task, EvidenceOracleAllocator(), SimulatedPolicy(), archive, budget=2)
    assert result.trace.events[0].platform == "desktop"
