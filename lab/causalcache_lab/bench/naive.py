"""The naive memory most computer-use agents use: base64 screenshots in ``messages``, trimmed per call.

Each step appends the model's reply and a user message holding the new screenshot as a base64 data-URL
``image_url`` block; before each model call the prompt drops every image block except the newest
``past + 1`` (the current screen plus ``past`` past ones). With ``trim_state=False`` (the usual graph,
as in ``examples/langgraph_agent_baseline.py``) the state keeps every screenshot and only the prompt is
trimmed; with ``trim_state=True`` the stored messages are trimmed too (the naive agent's best case).
"""

from __future__ import annotations

import base64
from typing import Any

from causalcache_memory._optional import require

__all__ = ["NaiveMessageMemory", "keep_last_images", "screenshot_message"]


def screenshot_message(png: bytes) -> Any:
    """A ``HumanMessage`` with the screenshot as a base64 data-URL image block."""
    messages = require("langchain_core.messages", purpose="the naive message-history baseline")
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return messages.HumanMessage(
        content=[
            {"type": "text", "text": "Current screen:"},
            {"type": "image_url", "image_url": {"url": url}},
        ]
    )


def keep_last_images(messages: list[Any], past: int) -> list[Any]:
    """Copy of ``messages`` with image blocks dropped except the newest ``past + 1``."""
    keep = past + 1
    out: list[Any] = []
    for message in reversed(messages):
        if isinstance(message.content, list):
            blocks = []
            for block in reversed(message.content):
                if isinstance(block, dict) and block.get("type") == "image_url":
                    if keep == 0:
                        continue
                    keep -= 1
                blocks.append(block)
            if len(blocks) != len(message.content):
                message = message.model_copy(update={"content": blocks[::-1]})
        out.append(message)
    return out[::-1]


class NaiveMessageMemory:
    """Message-list memory of one episode (the baseline's per-step work, without a model call).

    Args:
        goal: the task instruction (system message).
        past: past screenshots kept in the prompt (4 in the baseline agent).
        trim_state: also trim the stored history (else it keeps every screenshot).
    """

    def __init__(self, goal: str, *, past: int = 4, trim_state: bool = False) -> None:
        core = require("langchain_core.messages", purpose="the naive message-history baseline")
        self._ai = core.AIMessage
        self.system = core.SystemMessage(f"Task: {goal}")
        self.past = past
        self.trim_state = trim_state
        self.messages: list[Any] = []

    def observe(self, png: bytes) -> None:
        """Append the new screenshot (base64-encoded into a message)."""
        self.messages.append(screenshot_message(png))
        if self.trim_state:
            self.messages = keep_last_images(self.messages, self.past)

    def prompt(self) -> list[Any]:
        """The model input: system message plus the history trimmed to ``past + 1`` screenshots."""
        return [self.system, *keep_last_images(self.messages, self.past)]

    def record_reply(self, response: str) -> None:
        """Append the model's reply."""
        self.messages.append(self._ai(content=response))
