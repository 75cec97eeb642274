"""Events recorded through the graph carry the app the action was taken in and the screen size."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from lg_support import KeyPolicy, Screens
from typing_extensions import TypedDict

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.integrations.langgraph import CausalCacheMemory


class AppState(TypedDict, total=False):
    goal: str
    app: str
    steps: int


def test_recorded_events_carry_app_and_pixel_coordinates(archive) -> None:
    screens = Screens()
    apps = ["Home", "Shop", "Shop", "Messages"]
    memory = CausalCacheMemory(budget=2, policy=KeyPolicy(), archive=archive, allocation=RecentAllocator())

    def shoot(state: AppState) -> dict[str, Any]:
        return {"screenshot": screens.screenshot(), "app": apps[0], "steps": 0}

    def act(state: AppState) -> dict[str, Any]:
        steps = state.get("steps", 0) + 1
        action = memory.action(state)
        screens.act(action.to_dict() if action else None)
        return {"screenshot": screens.screenshot(), "app": apps[min(steps, len(apps) - 1)], "steps": steps}

    builder = StateGraph(AppState)
    builder.add_node("observe", memory.observe_node(shoot, schema=AppState))
    builder.add_node("decide", memory.decide_node(schema=AppState))
    builder.add_node("act", memory.record_node(act, schema=AppState))
    builder.add_edge(START, "observe")
    builder.add_edge("observe", "decide")
    builder.add_edge("decide", "act")
    builder.add_conditional_edges("act", lambda s: END if s["steps"] >= 3 else "decide", ["decide", END])
    from langgraph.checkpoint.memory import InMemorySaver

    graph = builder.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "apps"}, "recursion_limit": 50}
    graph.invoke({"goal": "find the key"}, config)
    trace = memory.trace(graph, config)
    assert [e.app for e in trace.events] == ["Home", "Shop", "Shop"]  # the app each action was taken in
    size = archive.open_image(trace.events[0].pre_screenshot).size
    assert trace.events[0].screen_size == size
    assert trace.events[1].summary.endswith("[Shop]")
    assert "0.5" not in trace.events[0].summary  # pixel coordinates, not relative ones
