"""lab/tools/learn_fire_probe.py: the deployment's firing rule, replayed offline (RESULTS.md 9i)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest


@pytest.fixture(scope="module")
def tool(load_tool):
    return load_tool("learn_fire_probe")


def test_fired_keeps_the_top_share_per_budget_and_never_a_non_positive_gain(tool) -> None:
    # (top swap, unused, B): five states at B 4 (m = 2 at budget 0.4), three at B 2 (m = 1)
    gains4, gains2 = [0.9, -0.1, 0.5, 0.7, 0.2], [-0.3, -0.2, -0.5]
    rows = [((g, 0.0, 0), None, 4) for g in gains4] + [((g, 0.0, 0), None, 2) for g in gains2]
    assert tool._fired(rows, 0.4) == {0, 3}  # B 2's best is negative: nothing fires there
    assert tool._fired(rows, 0.1) == set()  # floor(0.1 * n) = 0 for both budgets


def test_top_is_the_best_first_swap_out_of_recent_b(tool) -> None:
    ex = SimpleNamespace(
        from_recent=np.array([True, False]),
        group=np.array([0, 0, 0, 1]),
        cand=np.array([3, 4, 2, 5]),
        out=np.array([2, 2, 2, 1]),
        y=np.array([1.0, 2.0, 0.0, 9.0]),
    )
    d = np.array([0.1, 0.6, 5.0, 7.0])  # entry 2 keeps (cand == out), entry 3 is a path group
    assert tool._top(d, ex) == (0.6, 2.0, 1)
    assert tool._top(d, SimpleNamespace(from_recent=np.zeros(0, bool), group=ex.group)) is None
