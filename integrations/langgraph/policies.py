"""Policies over LangChain chat models, and reading a typed action from a chat reply.

:class:`ChatModelPolicy` lets any LangChain chat model (or a function from messages to an ``AIMessage``)
act as the :class:`~causalcache_memory.policy.Policy` the memory controller drives: the rendered prompt
is bound to the archive, turned into OpenAI-format multimodal messages (pixels exist only for the call),
and the reply becomes a :class:`~causalcache_memory.policy.Generation`.

The action is read from the reply's first tool call (``click(x=..., y=...)``, or a tool whose arguments
hold ``{"type": ...}``) or else from the text (the library's ``parse_action`` when available, else the
first JSON object in it).
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any

from causalcache_memory._optional import require
from causalcache_memory.actions.model import ACTION_TYPES, Action
from causalcache_memory.errors import ActionParseError, PolicyError
from causalcache_memory.policy import Generation
from causalcache_memory.runtime.chat_format import openai_messages

if TYPE_CHECKING:
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["ChatModelPolicy", "generation_from_message", "parse_message_action", "prompt_messages"]

_ACTION_FIELDS = {f.name for f in fields(Action)}
ActionParser = Callable[[Any], Action | None]


def prompt_messages(prompt: BoundPrompt) -> list[Any]:
    """LangChain messages (system, user, assistant; images as data-URL blocks) for one model call."""
    messages = require("langchain_core.messages", purpose="the LangGraph integration")
    return list(messages.convert_to_messages(openai_messages(prompt)))


def _text_action(text: str) -> Action | None:
    try:
        actions = importlib.import_module("causalcache_memory.actions")
        parse = getattr(actions, "parse_action", None)
    except ImportError:  # pragma: no cover - the package always exists
        parse = None
    if parse is not None:
        try:
            parsed = parse(text)
            if isinstance(parsed, Action):
                return parsed
        except (ActionParseError, ValueError, TypeError):
            pass
    decoder = json.JSONDecoder()
    for start in (i for i, ch in enumerate(text) if ch == "{"):
        try:
            obj, _ = decoder.raw_decode(text, start)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("type") in ACTION_TYPES:
            return Action.from_dict(obj)
    return None


def _tool_action(call: dict[str, Any]) -> Action:
    name, args = call.get("name", ""), dict(call.get("args") or {})
    data = {"type": name, **args} if name in ACTION_TYPES else args
    if data.get("type") not in ACTION_TYPES:
        raise ActionParseError(
            f"tool call {name!r} is not a GUI action: name it after an action type "
            f"({', '.join(ACTION_TYPES[:5])}, ...) or pass its type in args['type']"
        )
    return Action.from_dict({k: v for k, v in data.items() if k in _ACTION_FIELDS})


def parse_message_action(message: Any) -> Action | None:
    """The action in an ``AIMessage``: first tool call, else parsed from the text; None if absent."""
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return _tool_action(calls[0])
    return _text_action(message_text(message))


def message_text(message: Any) -> str:
    text = getattr(message, "text", None)
    if isinstance(text, str):  # langchain-core 1.x: a str property
        return str(text)
    if callable(text):  # older langchain-core: a method
        return str(text())
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else json.dumps(content)


def response_text(message: Any) -> str:
    """The verbatim response ``r`` kept in the trace: reply text plus its first tool call as JSON."""
    text = message_text(message)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        call = json.dumps({"name": calls[0].get("name"), "args": calls[0].get("args")}, sort_keys=True)
        text = f"{text}\n{call}" if text else call
    return text


def generation_from_message(
    message: Any, *, parse: ActionParser | None = None, latency_s: float = 0.0
) -> Generation:
    """A :class:`Generation` from a chat reply (the parse error is kept, never raised)."""
    try:
        action = (parse or parse_message_action)(message)
        error = None if action is not None else "no action found in the reply"
    except (ActionParseError, ValueError, TypeError) as exc:
        action, error = None, str(exc)
    return Generation(response=response_text(message), action=action, parse_error=error, latency_s=latency_s)


class ChatModelPolicy:
    """A :class:`~causalcache_memory.policy.Policy` backed by a LangChain chat model.

    Args:
        model: a ``BaseChatModel`` (anything with ``invoke(messages)``) or a callable ``messages -> AIMessage``.
        parse: reads the action from the reply (default :func:`parse_message_action`).
        name: identifies the policy in logs.
    """

    def __init__(self, model: Any, *, parse: ActionParser | None = None, name: str | None = None) -> None:
        self.model = model
        self.parse = parse
        self.name = name or type(model).__name__

    def generate(self, prompt: BoundPrompt) -> Generation:
        messages = prompt_messages(prompt)
        invoke = getattr(self.model, "invoke", None) or self.model
        reply = invoke(messages)
        return generation_from_message(reply, parse=self.parse)

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]:
        raise PolicyError(
            f"{self.name}: a chat model exposes no teacher-forced log-likelihood; score() needs a "
            "transformers or SGLang policy"
        )
