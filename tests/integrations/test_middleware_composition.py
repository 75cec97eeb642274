"""``SummarizationMiddleware`` and ``ContextEditingMiddleware`` in one ``create_agent`` with the memory.

Who removes images: only the memory. The model's prompt is rendered from the memory's trace (the B
allocated screens and the current one), so the two LangChain middlewares, in either order, change
neither which screenshots the model sees nor the recorded trace; the summarizer only ever reads
references (the memory archived every screenshot in state), and a summary that quotes an old
reference is never taken for the current screen.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware, SummarizationMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from pydantic import ConfigDict, Field
from test_trace_policy import ImageCheckingModel, noisy_screen

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.config import parse_config
from causalcache_memory.integrations.langgraph import CausalCacheMemory, find_image_data, find_screenshot_refs

STEPS = 6


class QuotingSummarizer(BaseChatModel):
    """A summarizer that quotes the first screenshot reference it reads (a summary an LLM may write)."""

    inputs: list = Field(default_factory=list)
    model_config = ConfigDict(arbitrary_types_allowed=True)

    @property
    def _llm_type(self) -> str:
        return "quoting-summarizer"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any):
        self.inputs.append(messages)
        refs = find_screenshot_refs(messages)  # the conversation is one text block of the prompt
        text = f"The agent started on [screenshot sha256:{refs[0]}] and clicked." if refs else "It clicked."
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text))])


def _run(root: str, middleware: list[Any]) -> tuple[CausalCacheMemory, Any, ImageCheckingModel, dict]:
    config = parse_config({"budget": 2, "checkpointer": {"kind": "memory"}})
    memory = CausalCacheMemory(
        config=config, archive=LocalArchive(os.path.join(root, "a")), allocation=RecentAllocator()
    )
    done: list[int] = []

    @tool
    def click(x: int, y: int) -> list:
        """Click at pixel (x, y); returns the new screen."""
        done.append(x)
        return memory.tool_screenshot(noisy_screen(len(done)), f"clicked {x}")

    model = ImageCheckingModel(steps=STEPS)
    stack = [memory.middleware() if m == "memory" else m for m in middleware]
    agent = create_agent(model, tools=[click], middleware=stack, checkpointer=memory.checkpointer())
    cfg = {"configurable": {"thread_id": "t"}, "recursion_limit": 200}
    agent.invoke({"messages": [memory.screenshot_message(noisy_screen(0), "Click six times")]}, cfg)
    return memory, agent, model, cfg


def _summarization(summarizer: QuotingSummarizer) -> SummarizationMiddleware:
    return SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("messages", 2))


def _editing() -> ContextEditingMiddleware:
    return ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=0, keep=1)])  # clears at every call


@pytest.mark.parametrize("order", ["summarize-memory-edit", "edit-memory-summarize", "memory-first"])
def test_the_model_sees_the_memorys_screens_whatever_the_middleware_order(tmp_path, order):
    _, _, alone, _ = _run(str(tmp_path / "alone"), ["memory"])
    summarizer = QuotingSummarizer()
    stack = {
        "summarize-memory-edit": [_summarization(summarizer), "memory", _editing()],
        "edit-memory-summarize": [_editing(), "memory", _summarization(summarizer)],
        "memory-first": ["memory", _summarization(summarizer), _editing()],
    }[order]
    memory, agent, model, cfg = _run(str(tmp_path / order), stack)
    assert model.images_seen == alone.images_seen  # same screenshots, same order, at every call
    assert len(model.images_seen) == STEPS + 1 and all(len(s) <= 3 for s in model.images_seen)
    trace = memory.trace(agent, cfg)
    assert len(trace) == STEPS  # every step recorded once
    assert summarizer.inputs, "the summarization did run"
    assert not any(find_image_data(batch) for batch in summarizer.inputs)  # it read references only
    messages = agent.get_state(cfg).values["messages"]
    assert any(m.additional_kwargs.get("lc_source") == "summarization" for m in messages)
    assert not find_image_data(messages)  # no pixels in state, whichever middleware wrote last


def test_a_summary_quoting_an_old_screen_is_not_taken_for_the_current_one(tmp_path):
    """A second user turn without a screenshot: the summary (which quotes the first screen's reference)
    and the new text are both after the last reply; the current screen stays the last tool's."""
    import hashlib

    from langchain_core.messages import HumanMessage

    summarizer = QuotingSummarizer()
    tight = SummarizationMiddleware(summarizer, trigger=("messages", 6), keep=("tokens", 1))
    memory, agent, model, cfg = _run(str(tmp_path), [tight, "memory"])
    agent.invoke({"messages": [HumanMessage("Now report what you did")]}, cfg)
    messages = agent.get_state(cfg).values["messages"]
    summary = next(m for m in messages if m.additional_kwargs.get("lc_source") == "summarization")
    last = hashlib.sha256(noisy_screen(STEPS)).hexdigest()
    (quoted,) = find_screenshot_refs([summary])
    assert quoted != last  # the summary quotes an older screen
    assert model.images_seen[-1][-1] == last  # the second turn's current screen: the last tool screen
    assert memory.trace(agent, cfg).current_screenshot == last
