"""The naive memory most computer-use agents use: base64 screenshots in ``messages``, trimmed per call.

Each step appends the model's reply and a user message holding the new screenshot as a base64 data-URL
``image_url`` block; before each model call the prompt drops every image block except the newest
``past + 1`` (the current screen plus ``past`` past ones). With ``trim_state=False`` (the usual graph,
as in ``examples/langgraph_agent_baseline.py``) the state keeps every screenshot and only the prompt is
trimmed; with ``trim_state=True`` the stored messages are trimmed too (the naive agent's best case).
Both rules come from :mod:`causalcache_memory.integrations.langgraph.baseline` (the example uses them too).
"""

from __future__ import annotations

from typing import Any

from causalcache_memory._optional import require
from causalcache_memory.integrations.langgraph.baseline import data_url_message, keep_last_images

__all__ = ["NaiveMessageMemory", "keep_last_images", "screenshot_message"]

#: the baseline's screenshot message (:func:`~causalcache_memory.integrations.langgraph.baseline.data_url_message`)
screenshot_message = data_url_message


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
