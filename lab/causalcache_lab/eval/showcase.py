"""The HTML report's showcase: one episode's rows (the library's :func:`~causalcache_memory.timeline_html.thread_steps`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_memory.timeline_html import thread_steps

if TYPE_CHECKING:
    from causalcache_lab.eval.world_agent import EpisodeOutcome
    from causalcache_lab.world.tasks import Task

__all__ = ["showcase"]


def showcase(
    outcomes: Sequence[EpisodeOutcome],
    graphs: dict[tuple[str, int], Any],
    memories: dict[tuple[str, int], Any],
    tasks: dict[str, Task],
) -> dict[str, Any] | None:
    """One episode's timeline for the HTML report: a memory-critical task CausalCache solved by promoting
    a distant step (preferably one Recent-B failed)."""
    by_key = {(o.arm, o.task_id): o for o in outcomes}
    candidates = [
        o for o in outcomes if o.arm == "causalcache" and o.success and any(r.get("k") for r in o.log)
    ]
    if not candidates:
        candidates = [o for o in outcomes if o.arm == "causalcache"] or list(outcomes)
    if not candidates:
        return None

    def rank(o: EpisodeOutcome) -> tuple[int, int, int]:
        recent = by_key.get(("recent", o.task_id))
        return (o.split == "memory_critical", recent is not None and not recent.success, -o.steps)

    best = max(candidates, key=rank)
    graph = graphs[(best.arm, best.budget)]
    memory = memories[(best.arm, best.budget)]
    trace = memory.trace(graph, {"configurable": {"thread_id": best.thread_id}})
    steps = thread_steps(trace, best.log)
    task = tasks[best.task_id]
    return {
        "platform": task.platform,
        "arm": best.arm,
        "task_id": best.task_id,
        "goal": task.goal,
        "split": best.split,
        "success": best.success,
        "budget": best.budget,
        "steps": steps,
    }
