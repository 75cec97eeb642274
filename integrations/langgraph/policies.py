"""Policies over LangChain chat models, and reading a typed action from a chat reply.

:class:`ChatModelPolicy` lets any LangChain chat model (or a function from messages to an ``AIMessage``)
act as the :class:`~causalcache_memory.policy.Policy` the memory controller drives: the rendered prompt
is bound to the archive, turned into OpenAI-format multimodal messages (pixels exist only for the call),
and the reply becomes a :class:`~causalcache_memory.policy.Generation`.

The action is read from the reply's first tool call (``click(x=..., y=...)``, a tool whose arguments
name the action, or arguments holding ``{"type": ...}``) or else from the text
(:func:`~causalcache_memory.actions.parse_action`: PyAutoGUI code, JSON actions, tool-call tags), with
the coordinates read on the screen the reply acts on (pixels, relative, or the 0-1000 grid).
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Sequence
from dataclasses import fields, replace
from typing import TYPE_CHECKING, Any

from causalcache_memory._optional import require
from causalcache_memory.actions.coords import CoordMode
from causalcache_memory.actions.mobile import ACTION_SYNONYMS, parse_mobile_json
from causalcache_memory.actions.model import ACTION_TYPES, Action
from causalcache_memory.actions.parse import parse_action
from causalcache_memory.errors import ActionParseError, PolicyError
from causalcache_memory.integrations.langgraph.tracing import traced_messages
from causalcache_memory.policy import Generation
from causalcache_memory.render.prompt import merge_system_prompts
from causalcache_memory.runtime.chat_format import openai_messages
from causalcache_memory.summarize import summarize_action

if TYPE_CHECKING:
    from causalcache_memory.render.messages import BoundPrompt

__all__ = [
    "ChatModelPolicy",
    "call_parse_hook",
    "generation_from_message",
    "parse_message_action",
    "prompt_messages",
]

_ACTION_FIELDS = {f.name for f in fields(Action)}
_COORD_FIELDS = ("x", "y", "x2", "y2")
#: a parse hook: ``parse(message)`` or ``parse(message, screen_size=(w, h))`` -> Action | dict | None
ActionParser = Callable[..., Any]


def prompt_messages(prompt: BoundPrompt, *, user_system: str | None = None, traced: bool = True) -> list[Any]:
    """LangChain messages (one system message first, user, assistant; images as data-URL blocks).

    ``user_system`` (the agent's own system text) is merged into the memory's system message in the
    documented order (:func:`~causalcache_memory.render.prompt.merge_system_prompts`). With ``traced``,
    messages holding images are :class:`~.tracing.TracedHumanMessage` (traces record references).
    """
    messages = require("langchain_core.messages", purpose="the LangGraph integration")
    wire = openai_messages(prompt)
    if user_system:
        if wire and wire[0].get("role") == "system":
            wire[0] = {
                "role": "system",
                "content": merge_system_prompts(user_system, str(wire[0]["content"])),
            }
        else:
            wire.insert(0, {"role": "system", "content": user_system})
    converted = list(messages.convert_to_messages(wire))
    return traced_messages(converted) if traced else converted


def prompt_screen_size(prompt: Any) -> tuple[int, int] | None:
    """The recorded pixel size of the prompt's current screen (None when unknown)."""
    meta = getattr(getattr(prompt, "prompt", prompt), "meta", None) or {}
    size = meta.get("screen_size")
    return (int(size[0]), int(size[1])) if size else None


def _text_action(
    text: str, *, screen_size: tuple[int, int] | None, coords: CoordMode, platform: str
) -> Action:
    """The action in a reply's text (:func:`~causalcache_memory.actions.parse_action`); raises if none."""
    return parse_action(text, platform=platform, screen_size=screen_size, coords=coords)  # type: ignore[arg-type]


def _relative_only(args: dict[str, Any]) -> bool:
    values = [args[k] for k in _COORD_FIELDS if args.get(k) is not None]
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1 for v in values)


def _tool_action(
    call: dict[str, Any],
    *,
    screen_size: tuple[int, int] | None = None,
    coords: CoordMode = "auto",
) -> Action:
    """The action of one tool call, with its coordinates read in ``coords`` on ``screen_size``.

    Accepted: a tool named after an action (``click(x=412, y=88)``, ``type(text=...)``, or any name in
    the JSON action vocabulary such as ``tap``/``left_click``); a tool whose arguments name the action
    (``{"action": "left_click", "coordinate": [x, y]}``, computer-use style); or arguments holding this
    library's own serialization ``{"type": ..., relative coordinates}``.
    """
    name, args = str(call.get("name") or ""), dict(call.get("args") or {})
    if "action" in args or "action_type" in args:
        action = parse_mobile_json(args, screen_size=screen_size, coords=coords)
        target = args.get("target")
        return replace(action, target=str(target)) if isinstance(target, str) and target else action
    kind = args.get("type") if args.get("type") in ACTION_TYPES else None
    if kind is not None and coords in ("auto", "relative") and _relative_only(args):
        return Action.from_dict({k: v for k, v in args.items() if k in _ACTION_FIELDS})
    if kind is None:
        key = name.strip().lower().replace("-", "_").replace(" ", "_")
        if key not in ACTION_SYNONYMS and key not in ACTION_TYPES:
            raise ActionParseError(
                f"tool call {name!r} is not a GUI action: name it after an action type "
                f"({', '.join(ACTION_TYPES[:5])}, ...), pass the action in args['action'] "
                "(e.g. {'action': 'click', 'coordinate': [x, y]}), or pass a parse= hook"
            )
        kind = name
    data = {k: v for k, v in args.items() if k != "type"}
    action = parse_mobile_json({**data, "action": kind}, screen_size=screen_size, coords=coords)
    target = args.get("target")
    return replace(action, target=str(target)) if isinstance(target, str) and target else action


def parse_message_action(
    message: Any,
    *,
    screen_size: tuple[int, int] | None = None,
    coords: CoordMode = "auto",
    platform: str = "auto",
) -> Action | None:
    """The action in an ``AIMessage``: first tool call, else parsed from the text.

    ``screen_size`` is the pixel size of the screen the reply acts on (the memory passes the recorded
    size of the current screenshot), so pixel coordinates above 1000 parse; ``coords`` picks the
    coordinate convention (``auto``, ``absolute`` = pixels, ``relative`` = [0, 1], ``thousand`` = the
    0-1000 grid). Raises :class:`~causalcache_memory.errors.ActionParseError` saying what was wrong.
    """
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        return _tool_action(calls[0], screen_size=screen_size, coords=coords)
    return _text_action(message_text(message), screen_size=screen_size, coords=coords, platform=platform)


def message_text(message: Any) -> str:
    text = getattr(message, "text", None)
    if isinstance(text, str):  # langchain-core 1.x: a str property
        return str(text)
    if callable(text):  # older langchain-core: a method
        return str(text())
    content = getattr(message, "content", "")
    return content if isinstance(content, str) else json.dumps(content)


def response_text(
    message: Any, action: Action | None = None, screen_size: tuple[int, int] | None = None
) -> str:
    """The response ``r`` kept in the trace (and shown again in retained turns): the reply text plus its
    first tool call, written as the summaries write actions (``click (960, 540) "Orders"``, pixels on
    ``screen_size``) when ``action`` is the parsed call, else as JSON (a call that did not parse)."""
    text = message_text(message)
    calls = getattr(message, "tool_calls", None) or []
    if calls:
        if action is not None:
            call = summarize_action(action, screen_size)
        else:
            call = json.dumps({"name": calls[0].get("name"), "args": calls[0].get("args")}, sort_keys=True)
        text = f"{text}\n{call}" if text else call
    return text


def call_parse_hook(parse: ActionParser, message: Any, screen_size: tuple[int, int] | None) -> Action | None:
    """Call a user ``parse`` hook (passing ``screen_size=`` when it declares it); dicts become actions."""
    try:
        params = inspect.signature(parse).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    takes_size = "screen_size" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
    out = parse(message, screen_size=screen_size) if takes_size else parse(message)
    if inspect.isawaitable(out):
        raise ActionParseError(
            "the parse= hook returned an awaitable: parse hooks run inside the memory's decision and must "
            "be plain functions (do async work in your model node instead)"
        )
    if out is None or isinstance(out, Action):
        return out
    if isinstance(out, dict):
        return (
            Action.from_dict(out)
            if out.get("type") in ACTION_TYPES
            else parse_mobile_json(out, screen_size=screen_size)
        )
    raise ActionParseError(f"the parse= hook returned {type(out).__name__}; return an Action, a dict or None")


def generation_from_message(
    message: Any,
    *,
    parse: ActionParser | None = None,
    latency_s: float = 0.0,
    screen_size: tuple[int, int] | None = None,
    coords: CoordMode = "auto",
    platform: str = "auto",
) -> Generation:
    """A :class:`Generation` from a chat reply (the parse error is kept, never raised)."""
    try:
        if parse is not None:
            action = call_parse_hook(parse, message, screen_size)
        else:
            action = parse_message_action(message, screen_size=screen_size, coords=coords, platform=platform)
        error = None if action is not None else "the parse= hook found no action in the reply"
    except (ActionParseError, ValueError, TypeError) as exc:
        action, error = None, f"{type(exc).__name__}: {exc}"
    response = response_text(message, action, screen_size)
    return Generation(response=response, action=action, parse_error=error, latency_s=latency_s)


class ChatModelPolicy:
    """A :class:`~causalcache_memory.policy.Policy` backed by a LangChain chat model.

    Args:
        model: a ``BaseChatModel`` (anything with ``invoke(messages)``) or a callable ``messages -> AIMessage``.
        parse: reads the action from the reply (default :func:`parse_message_action`).
        name: identifies the policy in logs.
        coords: coordinate convention of the model's actions (``auto``, ``absolute``, ``relative``,
            ``thousand``); the screen size comes from the prompt (the current screen's recorded size).
        system: the agent's own system text, merged into the memory's system message.
    """

    def __init__(
        self,
        model: Any,
        *,
        parse: ActionParser | None = None,
        name: str | None = None,
        coords: CoordMode = "auto",
        system: str | None = None,
    ) -> None:
        self.model = model
        self.parse = parse
        self.name = name or type(model).__name__
        self.coords = coords
        self.system = system

    def generate(self, prompt: BoundPrompt) -> Generation:
        messages = prompt_messages(prompt, user_system=self.system)
        invoke = getattr(self.model, "invoke", None) or self.model
        reply = invoke(messages)
        return generation_from_message(
            reply, parse=self.parse, screen_size=prompt_screen_size(prompt), coords=self.coords
        )

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]:
        raise PolicyError(
            f"{self.name}: a chat model exposes no teacher-forced log-likelihood; score() needs a "
            "transformers or SGLang policy"
        )
