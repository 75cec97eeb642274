"""A minimal node-form agent graph (observe -> decide -> act) used by several tests."""

from __future__ import annotations

from typing import Any

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from causalcache_memory.integrations.langgraph import CausalCacheMemory


class LoopState(TypedDict, total=False):
    goal: str
    action: dict[str, Any] | None
    steps: int


def build_loop(
    memory: CausalCacheMemory, screens: Any, *, steps: int, checkpointer: Any = None, **compile_kw: Any
):
    def shoot(state: LoopState) -> bytes:
        return screens.screenshot()

    def act(state: LoopState) -> dict[str, Any]:
        screens.act(state.get("action"))
        return {"steps": state.get("steps", 0) + 1}

    def route(state: LoopState) -> str:
        return END if state.get("steps", 0) >= steps else "observe"

    builder = StateGraph(LoopState)
    builder.add_node("observe", memory.observe_node(shoot))
    builder.add_node("decide", memory.decide_node(schema=LoopState))
    builder.add_node("act", act)
    builder.add_edge(START, "observe")
    builder.add_edge("observe", "decide")
    builder.add_edge("decide", "act")
    builder.add_conditional_edges("act", route, ["observe", END])
    return builder.compile(checkpointer=checkpointer, **compile_kw)


def run_config(thread: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}, "recursion_limit": 200}
