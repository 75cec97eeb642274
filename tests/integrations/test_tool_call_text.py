"""Past tool calls are shown to the model as the summaries show actions (issue 28), not as JSON."""

from __future__ import annotations

import lg_support  # noqa: F401  (skips without langgraph/langchain)
from langchain_core.messages import AIMessage

from causalcache_memory.integrations.langgraph.policies import generation_from_message
from causalcache_memory.summarize import summarize_action


def _reply(args: dict) -> AIMessage:
    return AIMessage(content="clicking Orders", tool_calls=[{"name": "click", "args": args, "id": "c1"}])


def test_tool_call_is_written_as_the_summary_writes_it():
    generation = generation_from_message(
        _reply({"x": 0.5, "y": 0.5, "target": "Orders"}), screen_size=(1921, 1081)
    )
    assert generation.action is not None
    assert generation.response == 'clicking Orders\nclick (960, 540) "Orders"'
    assert generation.response.endswith(summarize_action(generation.action, (1921, 1081)))


def test_a_tool_call_that_does_not_parse_is_kept_verbatim():
    generation = generation_from_message(_reply({"where": "nowhere"}), screen_size=(1920, 1080))
    assert generation.action is None and generation.parse_error
    assert '"args": {"where": "nowhere"}' in generation.response
