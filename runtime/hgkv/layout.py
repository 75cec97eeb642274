"""Where images may sit in a prompt's messages, checked before pixels are paired with image roles.

The retained-turn layout (:mod:`causalcache_memory.render.prompt`): image parts name images ``0..n-1``
once each, in order; no image in the system message or an assistant turn; each history image alone in
the user message right after an assistant turn, with ascending event indices; the current image last, in
the final user message. ``encode_prompt`` runs :func:`check_prompt_layout` on every prompt, so the HGKV
gate (:mod:`.gate`) never meets a prompt whose pixels were paired with the wrong role. This module imports
nothing from the runtime (no import cycle with ``qwen_encoding``).
"""

from __future__ import annotations

from typing import Any

from causalcache_memory.errors import ImageSpanMismatchError

__all__ = ["check_prompt_layout"]


def check_prompt_layout(prompt: Any) -> None:
    """Validate where each image sits in a rendered (or bound) prompt's messages; see the module doc.

    Image-part indices are always checked (pixels are paired with placeholders by them); the position
    rules apply when the prompt holds a history image, i.e. when the HGKV gate would use it.

    Raises:
        ImageSpanMismatchError: naming the message, the part and the rule.
    """
    from causalcache_memory.render.messages import ImagePart

    prompt = getattr(prompt, "prompt", prompt)  # a BoundPrompt wraps the RenderedPrompt
    images, messages = prompt.images, prompt.messages
    placed: list[tuple[int, int]] = []  # (message index, image index) in message order
    for m, message in enumerate(messages):
        for part in message.parts:
            if isinstance(part, ImagePart):
                index = part.image
                if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(images):
                    raise ImageSpanMismatchError(
                        f"message {m} ({message.role}) has an image part naming image {index!r}, but the "
                        f"prompt declares {len(images)} images (0..{len(images) - 1}); re-render the prompt"
                    )
                placed.append((m, index))
    order = [i for _, i in placed]
    if order != list(range(len(images))):
        raise ImageSpanMismatchError(
            f"image parts name images {order} in message order; each of the {len(images)} declared images "
            "must appear exactly once, in declaration order (a reused, missing or reordered part would pair "
            "pixels with the wrong role)"
        )
    if not any(ref.role == "history" for ref in images):
        return  # nothing to gate: the adapter is bypassed for this prompt
    _check_positions(images, messages, placed)


def _check_positions(images: Any, messages: Any, placed: list[tuple[int, int]]) -> None:
    per_message: dict[int, list[int]] = {}
    for m, i in placed:
        per_message.setdefault(m, []).append(i)
    last = len(messages) - 1
    for m, found in per_message.items():
        role = messages[m].role
        if role != "user":
            raise ImageSpanMismatchError(
                f"message {m} is a {role} message holding image(s) {found}; only user turns hold images"
            )
    roles = [ref.role for ref in images]
    if roles.count("current") != 1 or roles[-1] != "current":
        raise ImageSpanMismatchError(
            f"image roles {roles}: a prompt with history images needs exactly one current image, the last one"
        )
    if placed[-1][0] != last:
        raise ImageSpanMismatchError(
            f"the current image sits in message {placed[-1][0]}, not in the final user message {last}"
        )
    events = []
    for m, i in placed[:-1]:
        if len(per_message[m]) != 1 or m == last:
            raise ImageSpanMismatchError(
                f"history image {i} shares message {m} with images {per_message[m]}; a retained turn's user "
                "message holds exactly its own screenshot"
            )
        if m == 0 or messages[m - 1].role != "assistant":
            raise ImageSpanMismatchError(
                f"history image {i} (message {m}) does not follow an assistant turn; a retained screenshot "
                "comes right after the verbatim response of its step"
            )
        events.append(images[i].event_index)
    if any(e is None for e in events) or events != sorted(set(events)):
        raise ImageSpanMismatchError(
            f"history event indices {events} must be distinct and ascending (the renderer orders S)"
        )
