"""The node API and the middleware are two doors into one step session; one controller per memory."""

from __future__ import annotations

import base64
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from lg_graphs import build_loop, run_config
from lg_support import KeyChatModel, KeyPolicy, Screens, relaxed_config, screen_png
from typing_extensions import TypedDict

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import TraceError
from causalcache_memory.integrations.langgraph import CausalCacheMemory
from causalcache_memory.integrations.langgraph.session import PendingStep, StepSession


@pytest.fixture
def calls(monkeypatch) -> dict[str, list[str]]:
    """Which StepSession methods ran, per door (``node`` or ``middleware``), read from the call stack."""
    seen: dict[str, list[str]] = {"node": [], "middleware": []}

    def spy(name: str) -> None:
        original = getattr(StepSession, name)

        def wrapped(self: StepSession, *args: Any, **kwargs: Any) -> Any:
            import traceback

            files = "".join(f.filename for f in traceback.extract_stack(limit=12))
            seen["middleware" if "middleware.py" in files else "node"].append(name)
            return original(self, *args, **kwargs)

        monkeypatch.setattr(StepSession, name, wrapped)

    for name in ("put", "begin", "screen", "decide", "commit"):
        spy(name)
    return seen


def _click_tool(screens: Screens) -> Any:
    @tool
    def click(x: float, y: float, target: str = "") -> list[dict[str, Any]]:
        """Click on the screen."""
        screens.act({"type": "click", "target": target})
        data = base64.b64encode(screens.screenshot()).decode()
        return [{"type": "image", "base64": data, "mime_type": "image/png"}]

    return click


def test_node_and_middleware_steps_run_through_one_step_session(tmp_path, calls) -> None:
    archive = LocalArchive(tmp_path / "a")
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=2, archive=archive, allocation=RecentAllocator(), policy=KeyPolicy()
    )
    graph = build_loop(memory, Screens(), steps=3)
    graph.invoke({"goal": "find the key", "steps": 0}, run_config("nodes"))
    node_calls = list(calls["node"])
    step = ["put", "begin", "screen", "commit", "decide", "commit"]  # observe node, then decide node
    assert node_calls == step * 3 and calls["middleware"] == []

    screens = Screens()
    agent = create_agent(
        KeyChatModel(screens=screens, steps=3), tools=[_click_tool(screens)], middleware=[memory.middleware()]
    )
    url = "data:image/png;base64," + base64.b64encode(screens.screenshot()).decode()
    first = HumanMessage(
        content=[{"type": "text", "text": "find the key"}, {"type": "image_url", "image_url": {"url": url}}]
    )
    agent.invoke({"messages": [first]}, {"configurable": {"thread_id": "agent"}})
    first_call = ["put", "begin", "decide", "commit"]  # the user's screen is observed, then decided
    tool_then_call = ["put", "screen", "commit", "begin", "decide", "commit"]  # the tool's screen recorded
    assert calls["middleware"] == first_call + tool_then_call * 3
    assert calls["node"] == node_calls  # the agent ran entirely through the middleware door


def test_the_pending_step_round_trips_through_state() -> None:
    step = PendingStep(t=3, response="r", action={"type": "click", "x": 0.5, "y": 0.5}, parse_error=None)
    assert PendingStep.from_state(step.to_state()) == step
    assert "tool_call_id" not in step.to_state()
    assert PendingStep.from_state(None) is None
    with pytest.raises(TraceError, match=r"state\['cc_pending'\] = 'junk' is not a pending step"):
        PendingStep.from_state("junk")


class GoalState(TypedDict, total=False):
    messages: Annotated[list, add_messages]
    goal: str


def _unannotated_graph(memory: CausalCacheMemory, schema: type | None = None) -> Any:
    def take_screenshot(state):  # no annotation: LangGraph hands the wrapper only its own keys
        return screen_png(1)

    def call_model(state):
        return {"messages": [AIMessage(content='{"action": "click", "coordinate": [0.5, 0.5]}')]}

    builder = StateGraph(GoalState)
    builder.add_node("observe", memory.observe_node(take_screenshot, schema=schema))
    builder.add_node("decide", memory.decide_node(call_model, schema=schema))
    builder.add_edge(START, "observe")
    builder.add_edge("observe", "decide")
    builder.add_edge("decide", END)
    return builder.compile()


def test_a_node_without_a_state_annotation_is_told_the_real_cause(tmp_path) -> None:
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=2, archive=LocalArchive(tmp_path), allocation=RecentAllocator()
    )
    graph = _unannotated_graph(memory)
    with pytest.raises(TraceError, match=r"node 'take_screenshot' has no type annotation .* schema=State"):
        graph.invoke({"goal": "open the mail"})
    graph = _unannotated_graph(memory, schema=GoalState)  # the fix the error names works
    records = list(graph.stream({"goal": "open the mail"}, stream_mode="custom"))
    assert [r["t"] for r in records] == [1] and records[0]["action"]["type"] == "click"


def _library_threads(exclude: set[threading.Thread] = frozenset()) -> list[threading.Thread]:  # type: ignore[assignment]
    """Live threads the library started (named ``causalcache-*``), except those in ``exclude`` (by object:
    a thread id is reused once its thread ended, and dropped memories' threads end on their own, P16)."""
    return [t for t in threading.enumerate() if t.name.startswith("causalcache-") and t not in exclude]


def test_live_library_threads_stay_bounded_over_200_steps_and_20_threads(tmp_path) -> None:
    before = set(_library_threads())  # of earlier tests' memories
    config = relaxed_config(checkpointer={"kind": "sqlite", "path": str(tmp_path / "c.sqlite")})
    memory = CausalCacheMemory(
        config=config,
        budget=2,
        archive=LocalArchive(tmp_path / "a"),
        allocation=RecentAllocator(),
        policy=KeyPolicy(),
    )
    saver = memory.checkpointer()
    long_run = build_loop(memory, Screens(), steps=200, checkpointer=saver)
    long_run.invoke({"goal": "g", "steps": 0}, {**run_config("long"), "recursion_limit": 1000})
    peak = len(_library_threads(before))

    def one_thread(i: int) -> int:
        graph = build_loop(memory, Screens(), steps=3, checkpointer=saver)
        graph.invoke({"goal": "g", "steps": 0}, run_config(f"t{i}"))
        return len(_library_threads(before))

    with ThreadPoolExecutor(max_workers=4) as pool:
        peak = max(peak, *pool.map(one_thread, range(20)))
    assert 1 <= peak <= 2  # one allocator worker and one screenshot writer for the memory
    memory.close()
    assert _library_threads(before) == []
    assert len(memory.episode_log(long_run, run_config("long"))) == 200  # 200 decisions were made
