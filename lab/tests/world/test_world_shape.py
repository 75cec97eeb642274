"""World v2 episode shape (issue 13): the errand-count knobs are what the tasks use, and the sweep tool
applies the rule of docs/results/world_shape_rule.md (chosen on dev templates, never on evaluation)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

from causalcache_lab.world import generate_tasks, tasks
from causalcache_lab.world.language import ERRANDS, READS, USES

ROOT = Path(__file__).resolve().parents[3]


def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"\{[^}]*\}", template)
    return re.compile("^" + ".+".join(re.escape(p) for p in parts) + "$")


_READS = [_pattern(s) for s, _, _ in READS.values()]
_USES = [_pattern(s) for s, _, _ in USES.values()]
_ERRANDS = [_pattern(s) for s, _, _ in ERRANDS.values()]


def _shape(goal: str) -> tuple[int, list[int], int]:
    """(errands before the first read, errands between consecutive reads, errands after the last read)."""
    sentences = [s.strip() for s in goal.rstrip(".").split(". ")]
    kinds = []
    for s in sentences:
        if any(p.match(s) for p in _READS):
            kinds.append("read")
        elif any(p.match(s) for p in _USES):
            kinds.append("use")
        else:
            assert any(p.match(s) for p in _ERRANDS), s
            kinds.append("errand")
    assert kinds[-1] == "use" and kinds.count("use") == 1
    reads = [i for i, k in enumerate(kinds) if k == "read"]
    between = [reads[j + 1] - reads[j] - 1 for j in range(len(reads) - 1)]
    return reads[0], between, len(kinds) - 1 - reads[-1] - 1


def _memory(n: int, seed: int) -> list:
    return [t for t in generate_tasks(n, seed=seed, templates="all") if t.split == "memory_critical"]


def test_memory_tasks_follow_the_configured_errand_ranges() -> None:
    seen_before, seen_after, seen_between = set(), set(), set()
    for task in _memory(240, seed=5):
        before, between, after = _shape(task.goal)
        inapp = task.family.startswith("inapp:")
        lo, hi = tasks.ERRANDS_BEFORE_READ
        assert lo <= before <= hi, task.goal
        # an in-app task puts one same-app distractor errand right after each read
        lo, hi = tasks.ERRANDS_AFTER_READ
        assert lo + inapp <= after <= hi + inapp, task.goal
        for gap in between:
            lo, hi = tasks.ERRANDS_BETWEEN_READS
            assert lo + inapp <= gap <= hi + inapp, task.goal
            seen_between.add(gap - inapp)
        seen_before.add(before)
        seen_after.add(after - inapp)
    # every value of each range occurs: the knob is what the generator draws from, end points included
    assert seen_before == set(range(tasks.ERRANDS_BEFORE_READ[0], tasks.ERRANDS_BEFORE_READ[1] + 1))
    assert seen_after == set(range(tasks.ERRANDS_AFTER_READ[0], tasks.ERRANDS_AFTER_READ[1] + 1))
    assert seen_between == set(range(tasks.ERRANDS_BETWEEN_READS[0], tasks.ERRANDS_BETWEEN_READS[1] + 1))


def test_changing_the_shape_changes_episode_length(monkeypatch) -> None:
    def mean_len(seed: int) -> float:
        memory = _memory(60, seed=seed)
        return sum(len(t.steps) for t in memory) / len(memory)

    base = mean_len(9)
    monkeypatch.setattr(tasks, "ERRANDS_BEFORE_READ", (6, 6))
    monkeypatch.setattr(tasks, "ERRANDS_AFTER_READ", (5, 5))
    longer = mean_len(9)
    assert longer > base + 8  # about 11 more errands of 2-3 steps each, less the shipped ranges' mean
    for task in _memory(30, seed=9):
        before, _, after = _shape(task.goal)
        assert before == 6 and after == 5 + task.family.startswith("inapp:")


def test_browsing_controls_follow_their_range() -> None:
    lo, hi = tasks.CONTROL_BROWSE_ERRANDS
    counts = set()
    for task in generate_tasks(200, seed=2, memory_fraction=0.0):
        n = len(task.goal.rstrip(".").split(". ")) - 1
        if task.family.endswith(":browse"):
            assert lo <= n <= hi, task.goal
            counts.add(n)
        else:
            assert n == 0, task.goal
    assert counts == set(range(lo, hi + 1))


# ----------------------------------------------------------------- the sweep tool's rule


@pytest.fixture(scope="module")
def sweep():
    path = ROOT / "lab" / "tools" / "world_shape_sweep.py"
    spec = importlib.util.spec_from_file_location("world_shape_sweep", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["world_shape_sweep"] = module
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop("world_shape_sweep", None)


def _report(plan: float, positional: float, oracle: float) -> dict:
    return {
        "plan_len_mean": {"memory_critical": plan, "control": 6.0},
        "max_positional_gain": positional,
        "oracle_gain": oracle,
    }


def test_rule_takes_the_shortest_candidate_meeting_both_conditions(sweep) -> None:
    reports = {
        "short": _report(12.0, 0.00, 0.60),  # below the paper's horizon range: not a candidate
        "a": _report(16.0, 0.09, 0.60),  # positional gain too large
        "b": _report(22.0, 0.05, 0.40),  # both conditions hold at their limits
        "c": _report(27.0, 0.01, 0.70),  # also holds, but longer
        "d": _report(31.0, 0.00, 0.70),  # above the range
    }
    chosen, why = sweep.choose(reports)
    assert chosen == "b" and "shortest" in why
    reports["b"]["oracle_gain"] = 0.39  # the ceiling condition is binding too
    assert sweep.choose(reports)[0] == "c"


def test_rule_falls_back_to_the_smallest_positional_gain(sweep) -> None:
    reports = {
        "a": _report(16.0, 0.12, 0.60),
        "b": _report(24.0, 0.07, 0.55),
        "c": _report(29.0, 0.06, 0.30),  # smallest gain but loses the ceiling: not eligible
    }
    chosen, why = sweep.choose(reports)
    assert chosen == "b" and "no candidate meets both" in why
    assert sweep.choose({"c": reports["c"]})[0] is None


def test_the_shipped_shape_is_the_chosen_candidate(sweep) -> None:
    import json

    result = json.loads((ROOT / "docs" / "results" / "world_shape_dev.json").read_text())
    assert result["templates"] == "dev"  # chosen on development templates only
    chosen = sweep.CANDIDATES[result["chosen"]]
    shipped = (
        tasks.ERRANDS_BEFORE_READ,
        tasks.ERRANDS_BETWEEN_READS,
        tasks.ERRANDS_AFTER_READ,
        tasks.CONTROL_BROWSE_ERRANDS,
    )
    assert shipped == chosen
    recomputed, _ = sweep.choose(result["candidates"])
    assert recomputed == result["chosen"]
