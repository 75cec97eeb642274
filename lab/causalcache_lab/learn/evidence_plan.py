"""Which trajectories the labels will cover, for the plan: with evidence labels alone, only those with
evidence entries.

Evidence labels (:mod:`.evidence`) label only the trajectories that have at least one evidence entry;
every other source labels every trajectory. The plan's refusal and its test-to-dev fold
(:mod:`.plan`) count the states that will be labelled, so with ``sources: {evidence: w}`` alone they
must count those trajectories only: counted over every trajectory, a plan passed without folding and
training then refused the few dev states the evidence trajectories gave (issue 55: 16 dev states).
Reading the evidence file costs no model call, so this is known before anything is labelled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["planned_trajectories"]


def planned_trajectories(config: Any, trajectories: Sequence[Any]) -> tuple[list[Any], str | None]:
    """``(the trajectories labelling will cover, a prefix for the refusal or None)`` (module doc)."""
    if set(config.sources) != {"evidence"}:
        return list(trajectories), None
    from causalcache_lab.learn.evidence import evidence_from_groups, evidence_from_links

    ev = config.evidence
    if ev.links:
        evidence = evidence_from_links(ev.links, trajectories, screen=ev.screen)
    else:
        evidence = evidence_from_groups(ev.groups)
    have = {tid for tid, _ in evidence}
    chosen = [t for t in trajectories if t.trajectory_id in have]
    origin = ev.links or ev.groups
    return chosen, (
        f"evidence labels alone label only the trajectories with evidence entries ({len(chosen)} of "
        f"{len(trajectories)} in {origin}), so the counts below are of those; "
    )
