"""Retained-turn prompt rendering: prompt data types and the renderer (wire formats are runtime-side)."""

from causalcache_memory.render.messages import BoundPrompt, sniff_mime
from causalcache_memory.render.prompt import (
    DEFAULT_SYSTEM_PROMPT,
    ImagePart,
    ImageRef,
    Message,
    RenderedPrompt,
    RenderOptions,
    TextPart,
    render_prompt,
)

__all__ = [
    "DEFAULT_SYSTEM_PROMPT",
    "BoundPrompt",
    "ImagePart",
    "ImageRef",
    "Message",
    "RenderOptions",
    "RenderedPrompt",
    "TextPart",
    "render_prompt",
    "sniff_mime",
]
