"""Where the evidence sits in an episode, and the family's position rule (docs/WORLD.md, "Where the
evidence sits").

For a memory-critical task with (first) evidence event ``e`` (the plan step whose post-action screen first
shows a needed value) and need decision ``N``, the history at the need is events ``1..N-1``:

* the evidence is among **First-B's** events iff ``e <= B``;
* it is inside **Recent-B's** window iff ``N - e <= B`` (the evidence age is at most ``B``);
* a position drawn uniformly from ``1..N-1`` would be among the first ``B`` with probability
  ``min(1, B / (N - 1))``; its mean over tasks is the *uniform share*.

**The rule** (written before any closed-loop run of the new shape): every value of the ``before_read``
knob must, on the development worlds' memory-critical tasks, put the evidence among the first ``B = 4``
events

1. no more often than a uniform position would (``first_share <= uniform_share``): not concentrated at the
   start;
2. no more often than inside Recent-B's window plus a tolerance (``first_share <= recent_share +
   POSITION_TOLERANCE``): the start of an episode holds the evidence no more often than its end, so a rule
   that keeps the oldest screens cannot win by position;
3. at least half as often as a uniform position would (``first_share >= uniform_share / 2``): the start
   is not avoided either -- evidence can appear anywhere.

:func:`before_read_positions` measures one ``before_read`` value on given (non-held-out) worlds;
:func:`meets_position_rule` applies the rule.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace

from causalcache_lab.world.family import world_spec
from causalcache_lab.world.tasks import Task
from causalcache_memory.errors import ConfigError

__all__ = [
    "POSITION_TOLERANCE",
    "EvidencePositions",
    "before_read_positions",
    "evidence_positions",
    "meets_position_rule",
]

#: rule 2's tolerance on ``first_share - recent_share`` (about two standard errors at 600 tasks)
POSITION_TOLERANCE = 0.05


@dataclass(frozen=True, slots=True)
class EvidencePositions:
    """Evidence positions of a set of memory-critical tasks at budget ``B``."""

    n: int
    """memory-critical tasks counted"""
    first_share: float
    """share whose evidence event ``e <= B`` (held by First-B)"""
    recent_share: float
    """share whose evidence age ``N - e <= B`` (held by Recent-B)"""
    uniform_share: float
    """mean of ``min(1, B / (N - 1))``: the first-B share a uniform evidence position would give"""
    mean_need: float
    """mean need decision ``N`` (the episode's length up to the use)"""
    histogram: dict[int, int]
    """evidence event ``e`` -> tasks"""


def evidence_positions(tasks: Sequence[Task], budget: int = 4) -> EvidencePositions:
    """:class:`EvidencePositions` of the memory-critical tasks among ``tasks`` (controls are skipped)."""
    memory = [t for t in tasks if t.split == "memory_critical" and t.evidence_step is not None]
    if not memory:
        raise ConfigError(
            f"tasks hold no memory-critical task with an evidence step ({len(tasks)} tasks); "
            "pass tasks drawn with memory_fraction > 0"
        )
    n = len(memory)
    steps = [(int(t.evidence_step or 0), t.need_step) for t in memory]
    return EvidencePositions(
        n=n,
        first_share=sum(e <= budget for e, _ in steps) / n,
        recent_share=sum(need - e <= budget for e, need in steps) / n,
        uniform_share=sum(min(1.0, budget / max(1, need - 1)) for _, need in steps) / n,
        mean_need=sum(need for _, need in steps) / n,
        histogram=dict(sorted(Counter(e for e, _ in steps).items())),
    )


def meets_position_rule(p: EvidencePositions, tolerance: float = POSITION_TOLERANCE) -> bool:
    """The module docstring's rule: not concentrated at the start, no more often there than at the end,
    and not avoided."""
    return (
        p.first_share <= p.uniform_share
        and p.first_share <= p.recent_share + tolerance
        and p.first_share >= p.uniform_share / 2
    )


def before_read_positions(
    value: tuple[int, int],
    worlds: Sequence[str] = ("dev-00", "dev-01", "dev-02", "dev-03"),
    *,
    n: int = 1200,
    seed: int = 7,
    budget: int = 4,
) -> EvidencePositions:
    """Evidence positions of ``n`` tasks spread over ``worlds`` with ``before_read`` set to ``value``
    (every other knob as the world has it). Refuses held-out worlds: the shape is chosen on dev."""
    from causalcache_lab.world.family_tasks import spec_tasks
    from causalcache_lab.world.splits import require_not_heldout

    require_not_heldout(worlds, "calibrate")
    if "v2" in worlds:
        raise ConfigError(
            "worlds holds 'v2', which has no before_read knob; use family worlds such as dev-00"
        )
    tasks: list[Task] = []
    for i, world_id in enumerate(worlds):
        spec = replace(world_spec(world_id), before_read=value)
        tasks += spec_tasks(n // len(worlds) + (i < n % len(worlds)), seed, spec)
    return evidence_positions(tasks, budget)
