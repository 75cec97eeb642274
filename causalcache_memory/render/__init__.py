"""Retained-turn prompt rendering: prompt data types and the renderer (wire formats are runtime-side)."""

from causalcache_memory.render.messages import BoundPrompt, sniff_mime
from causalcache_memory.render.prompt import (
    DEFAULT_SYSTEM_PROMPT,
    LAYOUTS,
    ImagePart,
    ImageRef,
    Message,
    RenderedPrompt,
    RenderOptions,
    TextPart,
    render_prompt,
    summaries_message,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "LAYOUTS",
    "BoundPrompt",
    "ImagePart",
    "ImageRef",
    "Message",
    "RenderOptions",
    "RenderedPrompt",
    "TextPart",
    "render_prompt",
    "sniff_mime",
    "summaries_message",
]
