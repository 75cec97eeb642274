"""Issue 56, finding 1 (LangGraph path): the middleware reserves the thread's next step before the step's
tool runs, so a process that lost the thread (another one resumed it first) raises before it acts. Before,
the tool ran and only the commit after it failed: resumers of one dead run each executed the interrupted
step's action once."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from lg_support import KeyChatModel, KeyPolicy, Screens, relaxed_config

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import TraceConflictError
from causalcache_memory.integrations.langgraph import CausalCacheMemory
from causalcache_memory.trace.store import TraceStore


def test_a_tool_call_on_a_thread_another_process_holds_never_runs(tmp_path, monkeypatch) -> None:
    archive = LocalArchive(tmp_path / "a")
    memory = CausalCacheMemory(
        config=relaxed_config(), budget=2, archive=archive, allocation=RecentAllocator(), policy=KeyPolicy()
    )
    screens, ran = Screens(), []

    @tool
    def click(x: float, y: float, target: str = "") -> list[dict[str, Any]]:
        """Click on the screen."""
        ran.append(target)
        screens.act({"type": "click", "target": target})
        data = base64.b64encode(screens.screenshot()).decode()
        return [{"type": "image", "base64": data, "mime_type": "image/png"}]

    original = TraceStore.reserve

    def rival_first(self: TraceStore, episode_id: str, head: str | None) -> None:
        # another live process (another host) resumed the thread from this head a moment earlier
        rival = {"v": 1, "child": "f" * 64, "owner": "other-host.4242.0123456789ab"}
        archive.claim(episode_id, f"head.{head}", json.dumps(rival).encode())
        original(self, episode_id, head)

    monkeypatch.setattr(TraceStore, "reserve", rival_first)
    agent = create_agent(
        KeyChatModel(screens=screens, steps=3), tools=[click], middleware=[memory.middleware()]
    )
    url = "data:image/png;base64," + base64.b64encode(screens.screenshot()).decode()
    first = HumanMessage(
        content=[{"type": "text", "text": "find the key"}, {"type": "image_url", "image_url": {"url": url}}]
    )
    with pytest.raises(TraceConflictError, match=r"other-host\.4242"):
        agent.invoke({"messages": [first]}, {"configurable": {"thread_id": "held"}})
    assert ran == []  # refused before the action
