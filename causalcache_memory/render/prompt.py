"""Retained-turn prompt rendering (paper, Problem Formulation: the official retained-turn form).

For decision ``t`` and allocation ``S`` the prompt is, in order:

1. system message: the agent instructions;
2. user message: the goal and the *complete* list of event summaries ``ẽ_1 .. ẽ_{t-1}``;
3. for each ``j`` in ``S`` ascending, the retained turn of event ``j``: an assistant message with the
   verbatim response ``r_j`` followed by a user message with the archived post-action screenshot ``v_j``;
4. a user message with the current screenshot ``x_t`` and the request for the next action.

For fixed ``t`` and ``B`` every allocation yields the same message structure, the same image count
``|S| + 1`` and the same text except which events occupy the high-fidelity turns. Every image is
declared with its role (``history`` with its event index, or ``current``) so the HGKV adapter can build
its token gate fail-closed.

There is exactly one system message, first. When an agent brings its own system text, it is merged
into that message by :func:`merge_system_prompts` in this order: the agent's text, a blank line, the
memory's text.

``RenderOptions.layout`` orders the same content otherwise (docs/PROMPT_COST.md, "Layouts"):
``cache_friendly`` puts the retained turns before the summaries; ``conversation`` renders every event in
order (its summary line, and its response and screen when retained) and the current screen last as the
newest event's screen, sent once (:func:`_render_conversation`), so a step that appends the newest event
extends the previous step's prompt. :func:`summaries_message` finds the summaries in every layout.

``RenderOptions.dedupe_current_screen`` (off by default, which keeps the paper's prompt): when a
retained screenshot is byte-identical to the current screen (same content hash; in the paper's setting
the newest retained screenshot ``v_{t-1}`` *is* ``x_t``), its retained turn keeps its header and the
verbatim response but says the screen is the current one instead of repeating the image, so the current
screen is sent once. The image count is then ``|S| + 1`` minus the repeats; the HGKV adapter's gate
expects ``|S| + 1`` images, so leave the option off with HGKV.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from causalcache_memory.allocation.base import Allocation
from causalcache_memory.errors import RenderError
from causalcache_memory.render.messages import (
    BoundPrompt,
    ImagePart,
    ImageRef,
    Message,
    RenderedPrompt,
    TextPart,
)
from causalcache_memory.trace import Trace

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "LAYOUTS",
    "SAME_AS_CURRENT",
    "ImagePart",
    "ImageRef",
    "Message",
    "RenderOptions",
    "RenderedPrompt",
    "TextPart",
    "merge_system_prompts",
    "render_prompt",
    "summaries_message",
]

#: the prompt layouts (module docstring): the paper's order, the cache-friendly order, the conversation
LAYOUTS = ("retained_turns", "cache_friendly", "conversation")
Layout = Literal["retained_turns", "cache_friendly", "conversation"]

DEFAULT_SYSTEM_PROMPT = (
    "You are a GUI agent. You see the task, a one-line summary of every past step, a few past steps "
    "in full (your response and the screen after it), and the current screen. Reply with a short thought "
    "and then exactly one action."
)


#: text standing for a retained screenshot identical to the current screen (``dedupe_current_screen``)
SAME_AS_CURRENT = "(identical to the current screen, shown below)"


def merge_system_prompts(user_text: str | None, memory_text: str | None) -> str:
    """One system text from the agent's and the memory's: agent's first, a blank line, memory's.

    Either may be empty; identical texts are not repeated.
    """
    parts = [p.strip() for p in (user_text, memory_text) if p and p.strip()]
    if len(parts) == 2 and parts[0] == parts[1]:
        parts = parts[:1]
    return "\n\n".join(parts)


@dataclass(frozen=True, slots=True)
class RenderOptions:
    """Text of the fixed parts of the prompt, and whether to send the current screen only once.

    ``dedupe_current_screen``: replace a retained screenshot byte-identical to the current screen by
    :data:`SAME_AS_CURRENT` (off by default: the paper's prompt; see the module docstring).
    ``layout``: ``retained_turns`` (the paper's order), ``cache_friendly`` or ``conversation`` (module
    docstring).
    """

    system_prompt: str = DEFAULT_SYSTEM_PROMPT
    history_header: str = "Action history (every past step):"
    retained_header: str = "Screen after step {index}:"
    current_header: str = "Current screen:"
    request: str = "What is the next action?"
    dedupe_current_screen: bool = False
    layout: Layout = "retained_turns"

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise RenderError(f"layout={self.layout!r} is not one of {', '.join(LAYOUTS)}; set render.layout")


def render_prompt(
    trace: Trace,
    allocation: Allocation,
    *,
    options: RenderOptions | None = None,
    current_screenshot: str | None = None,
) -> RenderedPrompt:
    """Render the policy prompt for decision ``t = trace.t`` under ``allocation``."""
    options = options or RenderOptions()
    t = trace.t
    if allocation.t != t:
        raise RenderError(
            f"allocation was made for t={allocation.t} but the trace is at t={t}; allocate again for this step"
        )
    current = current_screenshot or trace.current_screenshot
    if current is None:
        raise RenderError(
            "the trace has no current screenshot; call trace.observe(sha256) with the current screen first"
        )
    if options.layout == "conversation":
        return _render_conversation(trace, allocation, options, current)
    images: list[ImageRef] = []
    messages: list[Message] = [Message("system", (TextPart(options.system_prompt),))]
    summaries = "\n".join(trace.summaries()) if len(trace) else "(no steps yet)"
    history = Message("user", (TextPart(f"Task: {trace.goal}\n{options.history_header}\n{summaries}"),))
    friendly = options.layout == "cache_friendly"
    if not friendly:
        messages.append(history)
    for j in allocation.selected:
        event = trace.event(j)
        messages.append(Message("assistant", (TextPart(event.response),)))
        header = options.retained_header.format(index=j)
        if options.dedupe_current_screen and event.screenshot == current:
            messages.append(Message("user", (TextPart(f"{header} {SAME_AS_CURRENT}"),)))
            continue
        images.append(ImageRef("history", event.screenshot, j))
        messages.append(Message("user", (TextPart(header), ImagePart(len(images) - 1))))
    if friendly:
        messages.append(history)
    images.append(ImageRef("current", current, None))
    messages.append(
        Message(
            "user",
            (TextPart(options.current_header), ImagePart(len(images) - 1), TextPart(options.request)),
        )
    )
    meta: dict[str, object] = {
        "t": t,
        "episode_id": trace.episode_id,
        "layout": options.layout,
        "summaries_message": next(i for i, m in enumerate(messages) if m is history),
    }
    size = trace.current_screen_size if current == trace.current_screenshot else None
    if size is not None:
        meta["screen_size"] = size  # the recorded size of x_t: parsers read pixel coordinates with it
    return RenderedPrompt(tuple(messages), tuple(images), allocation, trace.goal, meta)


def _render_conversation(
    trace: Trace, allocation: Allocation, options: RenderOptions, current: str
) -> RenderedPrompt:
    """The ``conversation`` layout (module docstring): the agent's conversation with old turns summarized.

    Messages, in order: the system text; the goal (``Task: ...`` and the history header); then every past
    event ``j`` in order: its summary line (a user message of its own, so a later prompt that summarizes
    more events still shares it whole), and, when ``j`` is in ``S``, its response (assistant) and its
    screen (user: the retained header, the image, the request). The current screen comes last, rendered as
    the screen of event ``t-1`` (the same header, image and request), so when ``S`` keeps its events and
    appends ``t-1``, the next step's prompt extends this one token for token up to the generation prompt.
    The screenshot of ``t-1`` is the current screen (role ``current``; ``meta["current_event"] = t-1``
    when its content hash is the trace's current one): it is sent once, as the current screen.
    """
    t = trace.t
    images: list[ImageRef] = []
    messages: list[Message] = [Message("system", (TextPart(options.system_prompt),))]
    parts: list[str] = ["system"]
    messages.append(Message("user", (TextPart(f"Task: {trace.goal}\n{options.history_header}"),)))
    parts.append("summaries")
    if not len(trace):
        messages.append(Message("user", (TextPart("(no steps yet)"),)))
        parts.append("summaries")
    selected = set(allocation.selected)
    last = t - 1
    current_event = None
    for j, summary in enumerate(trace.summaries(), start=1):
        messages.append(Message("user", (TextPart(summary),)))
        parts.append("summaries")
        if j not in selected:
            continue
        event = trace.event(j)
        messages.append(Message("assistant", (TextPart(event.response),)))
        parts.append(f"response:{j}")
        if j == last and event.screenshot == current:
            current_event = j  # the newest event's screen is the current screen: sent once, below
            continue
        images.append(ImageRef("history", event.screenshot, j))
        header = options.retained_header.format(index=j)
        messages.append(
            Message("user", (TextPart(header), ImagePart(len(images) - 1), TextPart(options.request)))
        )
        parts.append(f"screen:{j}")
    header = options.retained_header.format(index=last) if len(trace) else options.current_header
    images.append(ImageRef("current", current, None))
    messages.append(
        Message("user", (TextPart(header), ImagePart(len(images) - 1), TextPart(options.request)))
    )
    parts.append("current")
    meta: dict[str, object] = {
        "t": t,
        "episode_id": trace.episode_id,
        "layout": options.layout,
        "message_parts": tuple(parts),
    }
    if current_event is not None:
        meta["current_event"] = current_event
    size = trace.current_screen_size if current == trace.current_screenshot else None
    if size is not None:
        meta["screen_size"] = size
    return RenderedPrompt(tuple(messages), tuple(images), allocation, trace.goal, meta)


def summaries_message(prompt: RenderedPrompt | BoundPrompt) -> Message:
    """The goal and summaries message of a rendered (or bound) prompt, in any layout.

    In the ``conversation`` layout the goal and each summary are messages of their own: the result is one
    message with their texts joined by newlines (the text of the paper's summaries message)."""
    rendered = prompt.prompt if isinstance(prompt, BoundPrompt) else prompt
    meta = getattr(rendered, "meta", {})
    parts = meta.get("message_parts")
    if parts is not None:
        texts = [m.text for m, p in zip(rendered.messages, parts, strict=True) if p == "summaries"]
        return Message("user", (TextPart("\n".join(texts)),))
    index = meta.get("summaries_message", 1)  # prompt-like objects: the paper's
    return rendered.messages[index if isinstance(index, int) else 1]


def history_sequence(prompts: Sequence[RenderedPrompt]) -> list[tuple[int | None, ...]]:
    """Event indices of the history images of each prompt (debug helper)."""
    return [tuple(i.event_index for i in p.history_images) for p in prompts]
