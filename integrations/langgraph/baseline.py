"""The message-history baseline: what an agent without the memory does with its screenshots.

Each screenshot travels in ``messages`` as a base64 data-URL ``image_url`` block
(:func:`data_url_message`), and before each model call every image block is dropped except the newest
``past + 1`` (:func:`keep_last_images`: the current screen plus ``past`` past ones), like most public
computer-use agents. ``examples/langgraph_agent_baseline.py`` is an agent built this way, and the lab's
benchmarks measure the memory against it; it is written once, here, for both.
"""

from __future__ import annotations

import base64
from typing import Any

from causalcache_memory._optional import require

__all__ = ["data_url_message", "keep_last_images"]


def data_url_message(png: bytes) -> Any:
    """A ``HumanMessage`` ``[text "Current screen:", image_url data:image/png;base64,...]``."""
    messages = require("langchain_core.messages", purpose="the message-history baseline")
    url = "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    return messages.HumanMessage(
        content=[
            {"type": "text", "text": "Current screen:"},
            {"type": "image_url", "image_url": {"url": url}},
        ]
    )


def keep_last_images(messages: list[Any], past: int) -> list[Any]:
    """Copy of ``messages`` with image blocks dropped except the newest ``past + 1`` (others untouched)."""
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
