"""create_agent middleware on real LangChain/LangGraph with a chat model that reads its input images."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from lg_support import (
    FailingAllocation,
    KeyChatModel,
    PromoteKeyOnWitness,
    Screens,
    relaxed_config,
    screen_png,
)

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.errors import CausalCacheWarning
from causalcache_memory.integrations.langgraph import CausalCacheMemory, find_image_data

STEPS, BUDGET = 6, 2


def _tools(screens: Screens) -> list[Any]:
    @tool
    def click(x: float, y: float, target: str = "") -> list[dict[str, Any]]:
        """Click on the screen."""
        screens.act({"type": "click", "target": target})
        data = base64.b64encode(screens.screenshot()).decode()
        return [{"type": "text", "text": "done"}, {"type": "image", "base64": data, "mime_type": "image/png"}]

    return [click]


def _agent(memory, screens, model, checkpointer):
    return create_agent(
        model, tools=_tools(screens), middleware=[memory.middleware()], checkpointer=checkpointer
    )


def _first_message(screens: Screens) -> dict[str, Any]:
    url = "data:image/png;base64," + base64.b64encode(screens.screenshot()).decode()
    content = [{"type": "text", "text": "find the key"}, {"type": "image_url", "image_url": {"url": url}}]
    return {"role": "user", "content": content}


def test_create_agent_two_pass_and_references(archive, saver_factory):
    key = archive.put(screen_png(1, key=True)).sha256
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=BUDGET, archive=archive, allocation=PromoteKeyOnWitness(lambda: key)
    )
    screens = Screens()
    model = KeyChatModel(screens=screens, steps=STEPS)
    saver = saver_factory()
    agent = _agent(memory, screens, model, saver)
    cfg = {"configurable": {"thread_id": "a1"}, "recursion_limit": 100}
    events = [
        c
        for m, c in agent.stream(
            {"messages": [_first_message(screens)]}, cfg, stream_mode=["custom", "updates"]
        )
        if m == "custom"
    ]

    log = memory.episode_log(agent, cfg)
    assert log == events and len(log) == STEPS + 1  # the last call answers without a tool call
    fired = [r["t"] for r in log if r["second_pass"]]
    assert fired == [t for t in range(1, STEPS + 1) if t - 1 > BUDGET]  # final reply: no action, no witness
    assert log[-1]["action"] is None and log[-1]["parse_error"]
    for record in log[:-1]:
        expected = "want-key" if record["t"] == 1 else "found-key"  # key visible: recent, or restored
        assert record["action"]["target"] == expected == screens.actions[record["t"] - 1]["target"]
    assert len(model.calls) == len(log) + len(fired)  # the same handler was called again for pass 2

    state = agent.get_state(cfg).values
    trace = memory.trace(state)
    assert len(trace) == STEPS and trace.event(1).screenshot == key
    assert state["cc_screenshot"] == trace.current_screenshot
    # the first message and every tool screenshot were archived and replaced by references
    assert find_image_data(state) == []
    tool_messages = [m for m in state["messages"] if m.type == "tool"]
    assert len(tool_messages) == STEPS and all("[screenshot sha256:" in str(m.content) for m in tool_messages)
    for tup in list(saver.list(cfg))[:-2]:  # checkpoints after the input was stripped
        assert find_image_data(tup.checkpoint["channel_values"]) == []


def test_screenshot_message_keeps_pixels_out_of_every_checkpoint(archive, saver_factory):
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=BUDGET, archive=archive, allocation=RecentAllocator()
    )
    screens = Screens()
    saver = saver_factory()
    agent = _agent(memory, screens, KeyChatModel(screens=screens, steps=3), saver)
    cfg = {"configurable": {"thread_id": "a2"}}
    agent.invoke({"messages": [memory.screenshot_message(screens.screenshot(), "find the key")]}, cfg)
    checkpoints = list(saver.list(cfg))
    assert len(checkpoints) > 5
    for tup in checkpoints:
        assert find_image_data(tup.checkpoint) == [] and find_image_data(tup.pending_writes or []) == []
    assert [r["second_pass"] for r in memory.episode_log(agent, cfg)] == [False] * 4


def test_middleware_selector_failure_falls_back(archive):
    with pytest.warns(CausalCacheWarning, match="could not be warmed up"):  # said at construction
        memory = CausalCacheMemory(
            config=relaxed_config(), budget=BUDGET, archive=archive, allocation=FailingAllocation()
        )
    screens = Screens()
    model = KeyChatModel(screens=screens, steps=4)
    agent = create_agent(model, tools=_tools(screens), middleware=[memory.middleware()])
    with pytest.warns(CausalCacheWarning, match="Recent-B"):
        state = agent.invoke({"messages": [_first_message(screens)]})
    log = memory.episode_log(state)  # read back through the trace chain in the archive
    assert len(log) == 5 and all(r["fallback"] and r["selected"] == r["recent"] for r in log)
    assert len(model.calls) == 5


def test_async_agent_runs_both_passes(archive):
    import asyncio

    key = archive.put(screen_png(1, key=True)).sha256
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=BUDGET, archive=archive, allocation=PromoteKeyOnWitness(lambda: key)
    )
    screens = Screens()
    model = KeyChatModel(screens=screens, steps=5)
    agent = _agent(memory, screens, model, None)

    async def run() -> list[dict[str, Any]]:
        stream = agent.astream({"messages": [_first_message(screens)]}, stream_mode="custom")
        return [chunk async for chunk in stream]

    log = asyncio.run(run())
    assert [r["t"] for r in log if r["second_pass"]] == [4, 5]
    assert [a["target"] for a in screens.actions] == ["want-key"] + ["found-key"] * 4


class _TwoCallModel(KeyChatModel):
    """Adds a parallel ``peek`` tool call (it also returns an image) to every GUI action."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        reply = result.generations[0].message
        if reply.tool_calls:
            peek = {"name": "peek", "args": {}, "id": f"peek{len(self.calls)}"}
            calls = [*reply.tool_calls, peek]
            result.generations[0].message = AIMessage(content=reply.content, tool_calls=calls)
        return result


def test_parallel_tool_calls_record_only_the_action(archive):
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=BUDGET, archive=archive, allocation=RecentAllocator()
    )
    screens = Screens()

    @tool
    def peek() -> list[dict[str, Any]]:
        """Look at a zoomed region."""
        data = base64.b64encode(screen_png(77)).decode()
        return [{"type": "image", "base64": data, "mime_type": "image/png"}]

    agent = create_agent(
        _TwoCallModel(screens=screens, steps=3),
        tools=[*_tools(screens), peek],
        middleware=[memory.middleware()],
    )
    state = agent.invoke({"messages": [_first_message(screens)]})
    trace = memory.trace(state)
    assert len(trace) == 3 and trace.current_screenshot == archive.put(screens.screenshot()).sha256
    assert archive.put(screen_png(77)).sha256 not in trace.screenshots()
    assert find_image_data(state["messages"]) == []
