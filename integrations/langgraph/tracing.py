"""What traces record: archive references instead of image data (LangSmith / LangChain callbacks).

A trace of a GUI agent would otherwise carry every screenshot as base64, in up to three places per
step, and LangSmith refuses oversized payloads. Three mechanisms, each where LangChain/LangGraph give the
hook (read in langgraph 1.2 / langchain 1.5: ``langgraph.types.TracePolicy``, ``AgentMiddleware.
trace_policy``, ``BaseChatModel._format_for_tracing`` + ``langchain_core.load.dumpd``):

* **Hook and node spans**: :func:`trace_policy` is a LangGraph ``TracePolicy`` whose processors run
  :func:`redact_images`; the middleware sets it as its ``trace_policy`` (on by default), and a
  ``StateGraph`` node takes it as ``add_node(..., trace_policy=memory.trace_policy())``.
* **The model call's span** (the rendered prompt, ``B + 1`` screenshots): the prompt's messages are
  :class:`TracedHumanMessage`; they reach the model unchanged, but their serialized form, which is what
  LangChain tracers record (``dumpd`` calls ``to_json``), holds ``[screenshot sha256:...]`` references.
* **A GUI tool's span** records what the tool returns: a tool that returns
  ``memory.tool_screenshot(png)`` (archived at once, a reference block) keeps pixels out of it; the
  middleware takes the reference as the step's screen.

Runs this library does not create (the root graph run's input, another library's spans) are redacted
by the LangSmith client: ``Client(hide_inputs=redact_images, hide_outputs=redact_images)``.
References are ``sha256`` of the image's bytes: the archive address of a screenshot the memory stored.
"""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Callable
from typing import Any, ClassVar

from causalcache_memory.integrations.langgraph.images import (
    _block_payload,
    _decode_b64,
    _is_pil,
    _looks_like_b64_image,
    screenshot_ref,
)

__all__ = ["holds_images", "redact_images", "trace_policy", "traced_messages"]


def _ref_of(data: Any) -> str:
    """The reference text of image data: ``sha256`` of its bytes (a PIL image: of its pixels)."""
    if _is_pil(data):
        return screenshot_ref(hashlib.sha256(data.tobytes()).hexdigest())
    if isinstance(data, str):
        try:
            data = _decode_b64(data)
        except ValueError:
            data = data.encode()
    return screenshot_ref(hashlib.sha256(bytes(data)).hexdigest())


def redact_images(value: Any) -> Any:
    """A copy of ``value`` with every image replaced by its reference; the same object when it holds none.

    Replaces image content blocks (``image_url`` data URLs, ``{"type": "image", "base64": ...}``,
    ``source: {"type": "base64"}``) by a text block ``[screenshot sha256:...]``, and raw bytes, PIL
    images and bare base64 image strings (data URLs, PNG/JPEG/WEBP/GIF payloads) by the reference text.
    Walks dicts, lists, tuples, LangChain messages, pydantic models and dataclass-like requests. Never
    mutates ``value``; usable as a ``TracePolicy`` processor and as LangSmith's ``hide_inputs``.
    """
    return _redact(value, 0, _ref_of)


def holds_images(value: Any) -> bool:
    """Whether :func:`redact_images` would replace anything in ``value``, without hashing any image.

    The same walk as the redaction with a constant in place of each reference, so the two can never
    disagree; it costs the walk only (no base64 decode, no ``sha256`` of megabytes of pixels per step).
    """
    return _redact(value, 0, _no_ref) is not value


def _no_ref(data: Any) -> str:
    return "[screenshot]"


def _redact(value: Any, depth: int, ref: Callable[[Any], str]) -> Any:
    if depth > 64 or value is None or isinstance(value, (int, float, bool)):
        return value
    if isinstance(value, str):
        return ref(value) if _looks_like_b64_image(value) else value
    if isinstance(value, (bytes, bytearray, memoryview)) or _is_pil(value):
        return ref(value)
    if isinstance(value, dict):
        payload = _block_payload(value)
        if payload is not None:
            return {"type": "text", "text": ref(payload)}
        return _same_or(value, {k: _redact(v, depth + 1, ref) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        items = [_redact(v, depth + 1, ref) for v in value]
        changed = any(a is not b for a, b in zip(items, value, strict=True))
        return (items if isinstance(value, list) else tuple(items)) if changed else value
    if _is_message(value):
        content = _redact(value.content, depth + 1, ref)
        return value if content is value.content else _plain(value, content)
    if hasattr(value, "model_dump") or hasattr(value, "__dataclass_fields__"):
        return _redact_object(value, depth, ref)
    return value


def _same_or(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    return new if any(new[k] is not old[k] for k in old) else old


def _is_message(value: Any) -> bool:
    return hasattr(value, "content") and hasattr(value, "model_copy") and hasattr(value, "type")


def _plain(message: Any, content: Any) -> Any:
    """``message`` with ``content``, as its plain LangChain class (a traced subclass loses its marker)."""
    base = getattr(type(message), "_plain_class", type(message))
    return base(**{**message.model_dump(exclude={"content"}), "content": content})


def _redact_object(value: Any, depth: int, ref: Callable[[Any], str]) -> Any:
    """A model or dataclass (e.g. a ``ModelRequest``) as a redacted dict of its fields, if it holds images."""
    if hasattr(value, "__dataclass_fields__"):
        fields = {name: getattr(value, name, None) for name in value.__dataclass_fields__}
    else:
        try:
            fields = dict(value)  # pydantic: the fields, not a deep dump
        except TypeError:
            return value
    redacted = {k: _redact(v, depth + 1, ref) for k, v in fields.items()}
    return value if all(redacted[k] is fields[k] for k in fields) else redacted


def _messages_module() -> Any:
    return sys.modules.get("langchain_core.messages") or __import__(
        "langchain_core.messages", fromlist=["HumanMessage"]
    )


def _traced_class() -> type:
    global _TRACED
    if _TRACED is None:
        human = _messages_module().HumanMessage

        class TracedHumanMessage(human):  # type: ignore[misc,valid-type]
            """A ``HumanMessage`` whose serialized form (``to_json``, what LangChain tracers record via
            ``dumpd``) carries screenshot references; its ``content`` (what the model gets) is unchanged."""

            _plain_class: ClassVar[type] = human

            def to_json(self) -> Any:
                return _plain(self, redact_images(self.content)).to_json()

        _TRACED = TracedHumanMessage
    return _TRACED


_TRACED: type | None = None


def traced_messages(messages: list[Any]) -> list[Any]:
    """``messages`` with each human message that holds image data as a :class:`TracedHumanMessage`."""
    human = _messages_module().HumanMessage
    out = []
    for message in messages:
        if type(message) is human and holds_images(message.content):
            message = _traced_class()(**message.model_dump())
        out.append(message)
    return out


def __getattr__(name: str) -> Any:
    if name == "TracedHumanMessage":
        return _traced_class()
    raise AttributeError(name)


def trace_policy() -> Any:
    """A LangGraph ``TracePolicy`` recording references instead of images (None before langgraph 1.2,
    which has no ``TracePolicy``: there, use the LangSmith client's ``hide_inputs``/``hide_outputs``)."""
    try:
        from langgraph.types import TracePolicy
    except ImportError:
        return None
    return TracePolicy(process_inputs=redact_images, process_outputs=redact_images)
