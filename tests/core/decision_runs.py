"""Driving a controller over a growing trace, for the decision-statistics tests."""

from __future__ import annotations

from causalcache_memory import Trace
from causalcache_memory.controller import MemoryController


def run(controller: MemoryController, archive, steps: int, episode: str = "ep") -> list[dict]:
    """Decide ``steps`` times on a growing trace of ``archive.shots``; returns the decision records."""
    trace = Trace("Type the order number", episode_id=episode)
    trace.observe(archive.shots[0])
    records = []
    for i in range(1, steps + 1):
        decision = controller.decide(trace)
        records.append(decision.to_record())
        controller.record(trace, decision, archive.shots[i])
    return records
