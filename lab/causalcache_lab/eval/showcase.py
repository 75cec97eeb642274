"""The HTML report's showcase: one episode's timeline of event cards (summary / recent / promoted)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    steps = [_step(record, trace) for record in best.log]
    task = tasks[best.task_id]
    return {
        "arm": best.arm,
        "task_id": best.task_id,
        "goal": task.goal,
        "split": best.split,
        "success": best.success,
        "budget": best.budget,
        "steps": steps,
    }


def _step(record: dict[str, Any], trace: Any) -> dict[str, Any]:
    """One decision of the showcased episode: its event cards (fidelity per event) and what it did."""
    t = int(record["t"])
    selected, recent = set(record.get("selected", [])), set(record.get("recent", []))
    events = []
    for event in trace.events[: t - 1]:
        fidelity = "summary"
        if event.index in selected:
            fidelity = "recent" if event.index in recent else "promoted"
        events.append(
            {
                "index": event.index,
                "summary": event.summary,
                "screenshot": event.screenshot,
                "fidelity": fidelity,
            }
        )
    current = trace.event(t).pre_screenshot if t <= len(trace) else trace.current_screenshot
    size = trace.event(t).screen_size if t <= len(trace) else trace.current_screen_size
    return {
        "t": t,
        "summary_lines": [e.summary for e in trace.events[: t - 1]],
        "events": events,
        "current_screenshot": current,
        "action": _action_text(record.get("action"), size),
        "second_pass": bool(record.get("second_pass")),
        "k": int(record.get("k", 0)),
        "proposal": _action_text(record.get("proposal"), size) if record.get("second_pass") else None,
    }


def _action_text(action: dict[str, Any] | None, screen_size: tuple[int, int] | None) -> str:
    """The action in the summaries' units (pixels on the screen it acted on)."""
    from causalcache_memory.summarize import action_text

    return action_text(action or None, screen_size) or "(no action)"
