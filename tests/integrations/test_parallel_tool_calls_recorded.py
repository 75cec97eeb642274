"""Parallel tool calls under ``create_agent``: what the trace records, checked event by event (issue 52).

The step's action is the model's first tool call; the session keeps its ``tool_call_id`` in the pending
step, and a parallel call that also returns an image (a ``peek``) is kept out of the trace. The earlier
test caught a broken ``tool_call_id`` only through the ``TraceConflictError`` that the second of two
recordings of one step raises inside ``invoke``. Here the peek runs to completion (the memory's handling
included) before the click starts, and the checks read what the archive's trace store holds for the
episode, so a peek recorded as the step fails on the recorded screenshot, whatever is raised after it.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from lg_support import KeyChatModel, Screens, relaxed_config, screen_png

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.errors import TraceConflictError
from causalcache_memory.integrations.langgraph import CausalCacheMemory

PEEK = 77


class _ParallelModel(KeyChatModel):
    """Every GUI action comes with a ``peek`` tool call (returning an image), before or after it."""

    peek_first: bool = False

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        reply = result.generations[0].message
        if reply.tool_calls:
            peek = {"name": "peek", "args": {}, "id": f"peek{len(self.calls)}"}
            calls = [peek, *reply.tool_calls] if self.peek_first else [*reply.tool_calls, peek]
            result.generations[0].message = AIMessage(content=reply.content, tool_calls=calls)
        return result


class _PeekBeforeClick(AgentMiddleware):
    """Outermost tool wrapper: a click waits until the parallel peek (with the memory's handling of its
    result) has finished, so the two never commit at once and the peek is always handled first."""

    def __init__(self) -> None:
        super().__init__()
        self.peeked = threading.Event()

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        if request.tool_call["name"] == "peek":
            try:
                return handler(request)
            finally:
                self.peeked.set()
        self.peeked.wait(timeout=30)
        self.peeked.clear()
        return handler(request)


def _stored(memory: Any) -> Any:
    """The episode's trace as its archive holds it (the last committed head)."""
    store = memory.trace_store()
    return store.load_trace(store.head_of("episode"))


def _run(archive: Any, *, steps: int, peek_first: bool = False) -> tuple[Any, list[dict[str, Any]], Screens]:
    """The memory, the graph's state after each node (``stream_mode="values"``) and the fake GUI."""
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=2, archive=archive, allocation=RecentAllocator()
    )
    screens = Screens()

    @tool
    def click(x: float, y: float, target: str = "") -> list[dict[str, Any]]:
        """Click on the screen."""
        screens.act({"type": "click", "target": target})
        data = base64.b64encode(screens.screenshot()).decode()
        return [{"type": "image", "base64": data, "mime_type": "image/png"}]

    @tool
    def peek() -> list[dict[str, Any]]:
        """Look at a zoomed region."""
        data = base64.b64encode(screen_png(PEEK)).decode()
        return [{"type": "image", "base64": data, "mime_type": "image/png"}]

    model = _ParallelModel(screens=screens, steps=steps, peek_first=peek_first)
    agent = create_agent(model, tools=[click, peek], middleware=[_PeekBeforeClick(), memory.middleware()])
    url = "data:image/png;base64," + base64.b64encode(screens.screenshot()).decode()
    first = {
        "role": "user",
        "content": [
            {"type": "text", "text": "find the key"},
            {"type": "image_url", "image_url": {"url": url}},
        ],
    }
    states: list[dict[str, Any]] = []
    try:
        for state in agent.stream({"messages": [first]}, stream_mode="values"):
            states.append(state)
    except TraceConflictError:  # a second recording of one step: what was recorded first is checked
        pass
    return memory, states, screens


def test_the_step_records_the_action_tools_screen_not_the_parallel_peek(archive) -> None:
    memory, _, screens = _run(archive, steps=1)
    trace = _stored(memory)
    assert len(trace) == 1 and screens.actions == [{"type": "click", "target": "want-key"}]
    (event,) = trace.events
    assert event.action.type == "click" and event.action.target == "want-key"
    assert event.screenshot == archive.put(screen_png(1, key=True)).sha256  # the click's screen
    assert event.pre_screenshot == archive.put(screen_png(0)).sha256
    assert archive.put(screen_png(PEEK)).sha256 not in trace.screenshots()


def test_every_step_of_a_parallel_run_records_its_own_click_screen(archive) -> None:
    memory, _, screens = _run(archive, steps=3)
    trace = _stored(memory)
    shas = [archive.put(screen_png(i, key=i == 1)).sha256 for i in range(4)]
    assert [e.screenshot for e in trace.events] == shas[1:]
    assert [e.pre_screenshot for e in trace.events] == shas[:3]
    assert [e.action.target for e in trace.events] == [a["target"] for a in screens.actions]
    assert trace.current_screenshot == shas[3]


def test_the_pending_step_holds_the_first_tool_calls_id(archive) -> None:
    _, states, _ = _run(archive, steps=2)
    pending = [s["cc_pending"] for s in states if s.get("cc_pending")]
    decided = {p["t"]: p.get("tool_call_id") for p in pending}
    assert decided[1] == "c1" and decided[2] == "c2"  # the click's call, not the parallel peek's
    assert decided[3] is None  # the final answer had no tool call


def test_with_the_peek_first_the_first_call_is_the_step(archive) -> None:
    """The step's action is the reply's first tool call (documented): a peek listed first is the step."""
    memory, states, _ = _run(archive, steps=1, peek_first=True)
    pending = {
        s["cc_pending"]["t"]: s["cc_pending"].get("tool_call_id") for s in states if s.get("cc_pending")
    }
    assert pending[1] == "peek1"
    (event,) = _stored(memory).events
    assert event.screenshot == memory.resolve_archive().put(screen_png(PEEK)).sha256
