"""The message-history baseline is one rule, shared by the example agent and the lab's benchmarks."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage

from causalcache_memory.integrations.langgraph import baseline

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _images(messages) -> list[str]:
    return [
        b["image_url"]["url"]
        for m in messages
        if isinstance(m.content, list)
        for b in m.content
        if isinstance(b, dict) and b.get("type") == "image_url"
    ]


def test_keep_last_images_keeps_the_newest_past_plus_one_and_every_text() -> None:
    messages = []
    for i in range(6):
        messages += [baseline.data_url_message(bytes([i])), AIMessage(content=f"reply {i}")]
    kept = baseline.keep_last_images(messages, past=2)
    assert _images(kept) == _images(messages)[-3:]
    assert len(kept) == len(messages) and [m.text for m in kept] == [m.text for m in messages]
    assert kept[0] is not messages[0] and kept[-2] is messages[-2]  # only trimmed messages are copied


def test_the_example_agent_uses_the_library_rule() -> None:
    spec = importlib.util.spec_from_file_location(
        "baseline_example", EXAMPLES / "langgraph_agent_baseline.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("baseline_example", module)
    spec.loader.exec_module(module)
    assert module.keep_last_images is baseline.keep_last_images
    assert module.data_url_message is baseline.data_url_message
