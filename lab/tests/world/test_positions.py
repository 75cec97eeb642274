"""Where the evidence sits (issue 23): the family's ``before_read`` values meet the position rule of
``lab/world/positions.py`` on development worlds, and the rule can fail."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from causalcache_lab.world.family import KNOB_VALUES
from causalcache_lab.world.family_tasks import SPAN_TEMPLATES, generate_world_tasks
from causalcache_lab.world.positions import (
    before_read_positions,
    evidence_positions,
    meets_position_rule,
)
from causalcache_memory.errors import ConfigError


def _task(evidence_step, need_step, split="memory_critical"):
    return SimpleNamespace(split=split, evidence_step=evidence_step, need_step=need_step)


def test_evidence_positions_counts_first_recent_and_uniform_shares():
    tasks = [_task(2, 10), _task(8, 10), _task(5, 6), _task(1, 3, split="control")]
    p = evidence_positions(tasks, budget=4)
    assert p.n == 3
    assert p.first_share == pytest.approx(1 / 3)  # only e=2 is among events 1..4
    assert p.recent_share == pytest.approx(2 / 3)  # ages 2 and 1
    assert p.uniform_share == pytest.approx((4 / 9 + 4 / 9 + 4 / 5) / 3)
    assert p.histogram == {2: 1, 5: 1, 8: 1}
    with pytest.raises(ConfigError, match="memory-critical"):
        evidence_positions([_task(1, 3, split="control")])


@pytest.mark.parametrize("value", sorted(set(KNOB_VALUES["before_read"]["dev"])))
def test_every_before_read_value_meets_the_position_rule_on_dev_worlds(value):
    p = before_read_positions(value)
    assert p.n >= 500
    assert meets_position_rule(p), p


@pytest.mark.parametrize("value", [(0, 1), (0, 3), (2, 6)])
def test_the_position_rule_rejects_shapes_that_favour_or_avoid_the_start(value):
    # (0, 1)/(0, 3): the read is often the first thing done; (2, 6): never among the first four steps
    assert not meets_position_rule(before_read_positions(value))


def test_family_tasks_do_at_least_one_errand_before_the_read():
    tasks = generate_world_tasks(160, 3, worlds="dev", purpose="calibrate")
    memory = [t for t in tasks if t.split == "memory_critical" and t.template not in SPAN_TEMPLATES]
    # the read alone is open + tap (evidence at step 2); the shortest errand (go home) adds one step
    assert memory and min(t.evidence_step for t in memory) >= 3


@pytest.mark.parametrize("worlds", [("heldout-00",), ("dev-00", "v2")])
def test_before_read_positions_refuses_heldout_and_v2(worlds):
    with pytest.raises(ConfigError, match=r"held-out|v2"):
        before_read_positions((1, 4), worlds)
