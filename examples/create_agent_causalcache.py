"""CausalCacheMemory as middleware of LangChain's ``create_agent``.

GUI tools return the screen after each action as an image block; the middleware archives it and leaves
``[screenshot sha256:...]`` in the ``ToolMessage``, builds each model call's multimodal prompt from the
trace and the archive, and re-decides with a second model call when the allocation displaces a recent
step. State and checkpoints hold text and hashes only.

The model is the scripted vision model of ``langgraph_agent_baseline.py``, answering with tool calls.

Run: ``python examples/create_agent_causalcache.py``
"""

from __future__ import annotations

import base64
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

sys.path.insert(0, str(Path(__file__).resolve().parent))

from langgraph_agent_baseline import GOAL, FakeDesktop, ScriptedVisionModel

from causalcache_memory.config import CausalCacheConfig
from causalcache_memory.integrations.langgraph import CausalCacheMemory


class ToolCallingVisionModel(ScriptedVisionModel):
    """The scripted vision model, answering with one GUI tool call per step."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingVisionModel:
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        text = super()._generate(messages, stop, **kwargs).generations[0].message.text
        action = json.loads(text[text.index("{") :])
        name = action.pop("type")
        call = {
            "name": "type_text" if name == "type" else name,
            "args": action,
            "id": f"call-{len(messages)}",
        }
        reply = AIMessage(
            content=text[: text.index("{")].strip(), tool_calls=[] if name == "done" else [call]
        )
        return ChatResult(generations=[ChatGeneration(message=reply)])


def gui_tools(env: FakeDesktop) -> list[Any]:
    def screen(note: str) -> list[dict[str, Any]]:
        data = base64.b64encode(env.screenshot()).decode("ascii")
        return [{"type": "text", "text": note}, {"type": "image", "base64": data, "mime_type": "image/png"}]

    @tool
    def click(x: float, y: float, target: str = "") -> list[dict[str, Any]]:
        """Click at relative screen coordinates (x, y) on the element named target."""
        env.step({"type": "click", "x": x, "y": y, "target": target})
        return screen(f"clicked {target}")

    @tool
    def type_text(text: str, target: str = "") -> list[dict[str, Any]]:
        """Type text into the focused field."""
        env.step({"type": "type", "text": text, "target": target})
        return screen(f"typed {text!r}")

    return [click, type_text]


def parse_tool_action(message: Any) -> Any:
    """Map the ``type_text`` tool to the ``type`` action (other tools are named after their action)."""
    from causalcache_memory.integrations.langgraph import parse_message_action

    calls = [{**c, "name": "type" if c["name"] == "type_text" else c["name"]} for c in message.tool_calls]
    return parse_message_action(message.model_copy(update={"tool_calls": calls}))


def main(workdir: str | None = None) -> dict[str, Any]:
    root = Path(workdir or tempfile.mkdtemp(prefix="causalcache-agent-"))
    config = CausalCacheConfig(
        archive={"url": str(root / "archive")},
        checkpointer={"kind": "sqlite", "path": str(root / "checkpoints.sqlite")},
    )
    memory = CausalCacheMemory(budget=4, config=config)
    env = FakeDesktop()
    agent = create_agent(
        ToolCallingVisionModel(),
        tools=gui_tools(env),
        middleware=[memory.middleware(parse=parse_tool_action)],
        checkpointer=memory.checkpointer(),
    )
    run = {"configurable": {"thread_id": "agent"}, "recursion_limit": 100}
    first = memory.screenshot_message(env.screenshot(), GOAL)  # archived: only its hash enters state
    for mode, chunk in agent.stream({"messages": [first]}, run, stream_mode=["custom", "updates"]):
        if mode == "custom":
            print(
                f"step {chunk['t']}: S*={chunk['selected']} k={chunk['k']} second_pass={chunk['second_pass']}"
            )
    print(f"create_agent + causalcache: final screen={env.screen}")
    return {"screen": env.screen, "graph": agent, "config": run, "memory": memory}


if __name__ == "__main__":
    main()
