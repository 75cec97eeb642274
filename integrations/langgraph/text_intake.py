"""The ``screen_text`` key: what was on the screen, as text, beside the screenshot (never in the prompt).

A screenshot node may return the screen's text with the image, as OSWorld and AndroidWorld agents have
it (an accessibility-tree dump, or OCR the agent already ran)::

    def screenshot(state: State) -> dict:
        return {"screenshot": png_bytes, "screen_text": a11y_tree_text}

The memory takes ``screen_text`` out of the update (graph state never holds it, so checkpoints stay
small) and stores it in the archive beside the screenshot's blob
(:meth:`~causalcache_memory.archive.base.ScreenshotArchive.put_text`), off the decision path
(:class:`~causalcache_memory.archive.text_writer.ScreenTextWriter`); the learned selector reads it from
there. It is never put into a prompt. A screenshot without it is OCR'd in the background when
``archive.ocr.engine`` is set, else it simply has no text.

``create_agent`` tools give the same text either as the key ``screen_text`` of a ``Command`` update, or
as ``artifact={"screen_text": ...}`` on the ``ToolMessage`` that holds the screenshot in its content.

A text longer than the archive's cap (256 KiB of UTF-8) is cut to the cap, with one warning per memory;
a value that is not a string (or None) is refused with :class:`~causalcache_memory.errors.ScreenTextError`.
"""

from __future__ import annotations

import logging
from typing import Any

from causalcache_memory.archive._texts import MAX_TEXT_BYTES
from causalcache_memory.archive.text_writer import clip_text
from causalcache_memory.errors import ScreenTextError

__all__ = ["SCREEN_TEXT_KEY", "take_screen_text", "take_tool_screen_text", "text_for_archive"]

#: The state key (and ``Command`` update / ``ToolMessage.artifact`` key) of a screen's text.
SCREEN_TEXT_KEY = "screen_text"

_log = logging.getLogger("causalcache_memory.integrations.langgraph.text_intake")


def _checked(text: Any, where: str) -> str | None:
    if text is None or isinstance(text, str):
        return text
    raise ScreenTextError(
        f"{where} {SCREEN_TEXT_KEY!r} = {type(text).__name__} value: it must be a str (the screen's "
        "accessibility-tree dump or OCR text) or None"
    )


def take_screen_text(update: Any, label: str) -> tuple[Any, str | None]:
    """``update`` without its ``screen_text`` key, and that text (None when absent)."""
    if not isinstance(update, dict) or SCREEN_TEXT_KEY not in update:
        return update, None
    text = _checked(update[SCREEN_TEXT_KEY], f"node {label!r} returned")
    return {k: v for k, v in update.items() if k != SCREEN_TEXT_KEY}, text


def take_tool_screen_text(result: Any, label: str) -> tuple[Any, str | None]:
    """A tool's result without its screen text (a ``Command`` update key or a ``ToolMessage`` artifact
    key), and that text (None when absent)."""
    update = getattr(result, "update", None)
    if isinstance(update, dict) and SCREEN_TEXT_KEY in update:
        from langgraph.types import Command

        rest, text = take_screen_text(update, label)
        return Command(update=rest, goto=result.goto, graph=result.graph), text
    artifact = getattr(result, "artifact", None)
    if isinstance(artifact, dict) and SCREEN_TEXT_KEY in artifact and hasattr(result, "model_copy"):
        text = _checked(artifact[SCREEN_TEXT_KEY], f"tool {label!r} returned an artifact with")
        rest = {k: v for k, v in artifact.items() if k != SCREEN_TEXT_KEY} or None
        return result.model_copy(update={"artifact": rest}), text
    return result, None


def text_for_archive(text: str | None, warned: set[str]) -> str | None:
    """``text`` cut to the archive's cap (warning once per ``warned`` set when it had to be cut)."""
    if text is None:
        return None
    clipped = clip_text(text)
    if clipped is not text and "clipped" not in warned:
        warned.add("clipped")
        _log.warning(
            "%s of %d bytes (UTF-8) is over the archive's cap of %d bytes: stored cut to the cap (send "
            "the visible part of the accessibility tree to keep the end)",
            SCREEN_TEXT_KEY,
            len(text.encode("utf-8", errors="replace")),
            MAX_TEXT_BYTES,
        )
    return clipped
