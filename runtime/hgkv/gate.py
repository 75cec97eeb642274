"""The fail-closed history-token gate ``M_hist`` of the HGKV adapter.

``M_hist`` is a ``(batch, seq)`` bool tensor, True exactly on the ``<|image_pad|>`` tokens of images the
renderer declared as restored *history* screenshots (paper, "Policy-Preserving History-Gated KV
Adapter"). It is False on instruction text, event summaries, the current screenshot, framing tokens,
response/target tokens and padding.

The gate is rebuilt from the batch itself and cross-checked against independent sources before a
forward pass may use it:

* the model's token sequence (``<|image_pad|>`` runs, ``<|vision_start|>``/``<|vision_end|>`` framing)
  and, when present, ``mm_token_type_ids``;
* per-image patch geometry: ``pixel_values`` holds ``sum_i prod(image_grid_thw[i])`` patch rows and run
  ``i`` must hold ``prod(image_grid_thw[i]) / merge_size**2`` tokens, with
  ``merge_size`` read from the *model* config (not the processor);
* the renderer's declaration (each :class:`~causalcache_memory.runtime.qwen_encoding.ImageSpan` role):
  exactly one ``current`` image, last in the prompt; history images before it with ascending, distinct
  event indices;
* the message structure (:func:`check_prompt_layout`, run by ``encode_prompt`` before pixels are paired
  with placeholders): image parts name images ``0..n-1`` once each, in order; no image in the system
  message or an assistant turn; each history image alone in the user message right after an assistant
  turn (the retained turn); the current image last, in the final user message.

Any disagreement raises :class:`~causalcache_memory.errors.ImageSpanMismatchError`, so the adapter never
touches tokens it cannot attribute. A prompt with no history image (text only, summary-only, or any
number of current images) needs no gate: its row is all False and, if no row has a history image, no
gate is installed at all (the exact bypass of docs/HGKV.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ImageSpanMismatchError
from causalcache_memory.runtime.hgkv.layout import check_prompt_layout

if TYPE_CHECKING:
    import torch

    from causalcache_memory.runtime.qwen_encoding import EncodedBatch, EncodedPrompt, QwenTokens

__all__ = ["build_history_gate", "check_prompt_layout", "model_tokens"]


def model_tokens(model: Any) -> QwenTokens:
    """Framing token ids and the vision merge size, read from the model's own config."""
    from causalcache_memory.runtime.qwen_encoding import QwenTokens

    config = model.config
    try:
        merge = int(config.vision_config.spatial_merge_size)
        return QwenTokens(
            image_pad=int(config.image_token_id),
            vision_start=int(config.vision_start_token_id),
            vision_end=int(config.vision_end_token_id),
            merge_size=merge,
        )
    except (AttributeError, TypeError) as exc:
        raise ImageSpanMismatchError(
            f"model config {type(config).__name__} lacks the Qwen-VL image token ids or "
            f"vision_config.spatial_merge_size ({exc}); the HGKV gate needs a Qwen2.5-VL/Qwen3-VL model"
        ) from exc


def _check_roles(row: int, prompt: EncodedPrompt) -> None:
    spans = prompt.image_spans
    roles = [s.role for s in spans]
    bad = [r for r in roles if r not in ("history", "current")]
    if bad:
        raise ImageSpanMismatchError(f"row {row}: image roles {bad} are not 'history' or 'current'")
    if "history" not in roles:
        return  # no history image: nothing is gated in this row (text-only or current screens only)
    if roles.count("current") != 1 or roles[-1] != "current":
        raise ImageSpanMismatchError(
            f"row {row}: declared roles {roles} must hold exactly one 'current' image, the last one "
            "(retained-turn layout); a role swap or a missing current screen makes the gate ambiguous"
        )
    events = [s.event_index for s in spans[:-1]]
    if (
        spans[-1].event_index is not None
        or any(e is None for e in events)
        or events != sorted({e for e in events if e is not None})
    ):
        raise ImageSpanMismatchError(
            f"row {row}: history images must carry distinct ascending event indices and the current image none; "
            f"got history events {events}, current event {spans[-1].event_index}"
        )


def _row_spans(
    row: int, ids: list[int], grids: list[list[int]], prompt: EncodedPrompt, tokens: QwenTokens, mm: Any
) -> None:
    """Re-derive the image spans of one row and require them to equal the declared spans."""
    from causalcache_memory.render.prompt import ImageRef
    from causalcache_memory.runtime.qwen_encoding import find_image_spans

    refs = [ImageRef(s.role, s.sha256, s.event_index) for s in prompt.image_spans]
    try:
        found = find_image_spans(ids, grids, refs, tokens, mm_token_type_ids=mm)
    except ImageSpanMismatchError as exc:
        raise ImageSpanMismatchError(f"HGKV gate, batch row {row}: {exc}") from exc
    got = [(s.start, s.end) for s in found]
    declared = [(s.start, s.end) for s in prompt.image_spans]
    if got != declared:
        raise ImageSpanMismatchError(
            f"HGKV gate, batch row {row}: declared image spans {declared} differ from the encoded "
            f"<|image_pad|> runs {got}; re-encode the prompt instead of editing the batch"
        )


def _check_padding(row: int, ids: torch.Tensor, mask: torch.Tensor, real: int, tokens: QwenTokens) -> None:
    """Right padding only (mask 1...1 0...0) and no image or vision-framing token in it.

    Transformers counts ``<|image_pad|>`` tokens over the whole row, padding included, so one there would
    pair a patch with a token the gate never saw (and fail later with an unnamed ``ValueError``).
    """
    if bool(mask[real:].any()):
        raise ImageSpanMismatchError(
            f"HGKV gate, batch row {row}: the attention mask is not right padding (an attended token after "
            f"position {real}); collate prompts with right padding"
        )
    tail = ids[real:]
    image = (tail == tokens.image_pad) | (tail == tokens.vision_start) | (tail == tokens.vision_end)
    if bool(image.any()):
        pos = real + int(image.nonzero()[0, 0])
        raise ImageSpanMismatchError(
            f"HGKV gate, batch row {row}: token {int(ids[pos])} at position {pos} is an image token "
            f"(<|image_pad|> or vision framing) in the right padding (attended tokens end at {real}); "
            "pad with the tokenizer's pad token, never an image token"
        )


def build_history_gate(batch: EncodedBatch, tokens: QwenTokens) -> torch.Tensor:
    """``(batch, seq)`` bool gate, True exactly on declared history-image tokens (fail-closed).

    Args:
        batch: a collated :class:`~causalcache_memory.runtime.qwen_encoding.EncodedBatch`.
        tokens: framing ids and merge size from the *model* (:func:`model_tokens`).

    Raises:
        ImageSpanMismatchError: any disagreement between declared images and encoded image blocks.
    """
    import torch

    ids = batch.input_ids
    if ids.dim() != 2 or ids.shape[0] != len(batch.prompts):
        raise ImageSpanMismatchError(
            f"HGKV gate: input_ids shape {tuple(ids.shape)} does not match {len(batch.prompts)} prompts"
        )
    grids_all = batch.image_grid_thw.tolist() if batch.image_grid_thw is not None else []
    counts = [len(p.image_spans) for p in batch.prompts]
    if sum(counts) != len(grids_all):
        raise ImageSpanMismatchError(
            f"HGKV gate: the prompts declare {sum(counts)} images but image_grid_thw has {len(grids_all)} "
            "rows; every declared image needs exactly one grid row"
        )
    patches = sum(int(t) * int(h) * int(w) for t, h, w in grids_all)
    if batch.pixel_values is not None and int(batch.pixel_values.shape[0]) != patches:
        raise ImageSpanMismatchError(
            f"HGKV gate: pixel_values has {int(batch.pixel_values.shape[0])} patch rows but image_grid_thw "
            f"describes {patches}; the images and their geometry disagree"
        )
    width = int(ids.shape[1])
    gate = torch.zeros((len(batch.prompts), width), dtype=torch.bool)
    lengths = batch.attention_mask.sum(dim=1).tolist()
    offset = 0
    for row, prompt in enumerate(batch.prompts):
        _check_roles(row, prompt)
        real = int(lengths[row])
        if real < prompt.length:
            raise ImageSpanMismatchError(
                f"HGKV gate, batch row {row}: {real} attended tokens but the prompt has {prompt.length}"
            )
        _check_padding(row, ids[row], batch.attention_mask[row], real, tokens)
        mm = batch.mm_token_type_ids[row, :real].tolist() if batch.mm_token_type_ids is not None else None
        grids = grids_all[offset : offset + counts[row]]
        offset += counts[row]
        _row_spans(row, ids[row, :real].tolist(), grids, prompt, tokens, mm)
        for span in prompt.image_spans:
            if span.role == "history":
                gate[row, span.start : span.end] = True
    return gate
