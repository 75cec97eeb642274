"""create_agent with pixel tool arguments on 1920x1080 screens: every executed tool step is an event."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest
import user_agent as ua
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import ConfigDict, Field

from causalcache_memory.allocation import RecentAllocator

STEPS = 12


def _call(t: int) -> dict[str, Any]:
    """Tool call of step ``t``: pixel clicks (some above 1000), computer-use JSON, one unknown action."""
    if t % 5 == 4:  # the tool runs it, but it is no GUI action the memory knows: recorded unparsed
        return {"name": "computer", "args": {"action": "mouse_wiggle", "coordinate": [800, 600]}}
    if t % 3 == 0:
        return {"name": "computer", "args": {"action": "left_click", "coordinate": [1700, 1000]}}
    return {"name": "click", "args": {"x": 1650 if t % 2 else 412, "y": 1040 if t % 2 else 88}}


class PixelToolModel(BaseChatModel):
    """Replies with one scripted tool call per step, then a final answer."""

    steps: int = STEPS
    systems: list = Field(default_factory=list)
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "pixel-tools"

    def bind_tools(self, tools: Any, **kwargs: Any) -> PixelToolModel:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any):
        self.systems.append([m.text for m in messages if m.type == "system"])
        t = ua.step_of(messages)
        if t > self.steps:
            reply = AIMessage(content="all invoices archived")
        else:
            reply = AIMessage(content=f"step {t}", tool_calls=[{**_call(t), "id": f"call-{t}"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _screen_blocks(index: int) -> list[dict[str, Any]]:
    data = base64.b64encode(ua.screen(index)).decode()
    return [{"type": "text", "text": "ok"}, {"type": "image", "base64": data, "mime_type": "image/png"}]


def _tools(done: list[Any]) -> list[Any]:
    @tool
    def click(x: int, y: int) -> list[dict[str, Any]]:
        """Click at pixel (x, y) of the 1920x1080 screen."""
        done.append(("click", x, y))
        return _screen_blocks(len(done))

    @tool
    def computer(action: str, coordinate: list[int]) -> list[dict[str, Any]]:
        """Computer-use style action."""
        done.append((action, *coordinate))
        return _screen_blocks(len(done))

    return [click, computer]


def _first_message() -> dict[str, Any]:
    url = "data:image/png;base64," + base64.b64encode(ua.screen(0)).decode()
    content = [{"type": "text", "text": ua.GOAL}, {"type": "image_url", "image_url": {"url": url}}]
    return {"role": "user", "content": content}


def _check(memory, agent, cfg, done, model) -> None:
    trace = memory.trace(agent, cfg)
    assert len(done) == STEPS and len(trace) == STEPS  # every executed tool step is an event
    for event in trace.events:
        call = _call(event.index)
        assert event.screen_size == (ua.WIDTH, ua.HEIGHT)
        if call["args"].get("action") == "mouse_wiggle":
            assert event.unparsed and "mouse_wiggle" in event.metadata["parse_error"]
            assert "reply not parsed" in event.summary and "mouse_wiggle" in event.response
        elif call["name"] == "click":
            x, y = call["args"]["x"], call["args"]["y"]
            assert event.action.pixel(ua.WIDTH, ua.HEIGHT) == (x, y)
            assert f"click ({x}, {y})" in event.summary
        else:
            assert event.action.pixel(ua.WIDTH, ua.HEIGHT) == (1700, 1000)
    assert all(len(s) == 1 and s[0].startswith(ua.USER_SYSTEM) for s in model.systems)


def test_create_agent_with_pixel_tool_arguments_records_every_step(tmp_path):
    memory = ua.memory_for(str(tmp_path), allocation=RecentAllocator())
    done: list[Any] = []
    model = PixelToolModel()
    agent = create_agent(
        model,
        tools=_tools(done),
        system_prompt=ua.USER_SYSTEM,
        middleware=[memory.middleware()],
        checkpointer=memory.checkpointer(),
    )
    cfg = ua.run_config("agent-1")
    agent.invoke({"messages": [_first_message()]}, cfg)
    _check(memory, agent, cfg, done, model)


def test_create_agent_async_with_pixel_tools_and_a_parse_hook(tmp_path):
    seen: list[tuple[int, int] | None] = []

    def parse(message, screen_size):  # a user hook receives the current screen's recorded size
        seen.append(screen_size)
        return None  # defer to the default parser

    memory = ua.memory_for(str(tmp_path), allocation=RecentAllocator())
    done: list[Any] = []
    model = PixelToolModel()
    agent = create_agent(
        model,
        tools=_tools(done),
        system_prompt=ua.USER_SYSTEM,
        middleware=[memory.middleware(parse=_chain(parse))],
        checkpointer=memory.checkpointer(),
    )
    cfg = ua.run_config("agent-2")
    asyncio.run(agent.ainvoke({"messages": [_first_message()]}, cfg))
    _check(memory, agent, cfg, done, model)
    assert seen and set(seen) == {(ua.WIDTH, ua.HEIGHT)}


def _chain(hook):
    """A hook that observes, then falls back to the default parser (what users do to add a format)."""
    from causalcache_memory.integrations.langgraph import parse_message_action

    def parse(message, screen_size=None):
        return hook(message, screen_size) or parse_message_action(message, screen_size=screen_size)

    return parse


@pytest.mark.parametrize("bad", ["not-an-allocator", 3])
def test_bad_allocation_is_refused_at_construction(tmp_path, bad):
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match="recent"):  # the message lists the registered names
        ua.memory_for(str(tmp_path), allocation=bad)
