"""Qwen-VL prompt encoding with fail-closed image token spans.

A :class:`~causalcache_memory.render.BoundPrompt` is turned into model inputs with the model's own chat
template and processor. The processor expands each image placeholder into a run of ``<|image_pad|>``
tokens framed as ``<|vision_start|> <|image_pad|> x n <|vision_end|>`` with
``n = prod(image_grid_thw[i]) / merge_size**2``. :func:`find_image_spans` maps the ``i``-th run to the
``i``-th declared :class:`~causalcache_memory.render.ImageRef` (role ``history``/``current`` and event
index) and raises :class:`ImageSpanMismatchError` on *any* disagreement, so the HGKV adapter never gates
the wrong tokens.

:class:`EncodedBatch` pads encoded prompts (optionally followed by target tokens) on the *right*:
positions of real tokens, and so their logits, do not depend on the rest of the batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any, Literal

from causalcache_memory.errors import ImageSpanMismatchError
from causalcache_memory.runtime.chat_format import qwen_messages

if TYPE_CHECKING:
    import torch

    from causalcache_memory.render.messages import BoundPrompt
    from causalcache_memory.render.prompt import ImageRef

__all__ = [
    "EncodedBatch",
    "EncodedPrompt",
    "ImageSpan",
    "QwenTokens",
    "collate",
    "encode_prompt",
    "find_image_spans",
    "history_token_mask",
    "image_only_processor_class",
]


@dataclass(frozen=True, slots=True)
class ImageSpan:
    """Token span of one image: ``input_ids[start:end]`` are its ``<|image_pad|>`` tokens.

    ``start - 1`` holds ``<|vision_start|>`` and ``end`` holds ``<|vision_end|>``.

    Attributes:
        start, end: half-open token range of the image's pad tokens.
        role: ``history`` or ``current`` (from the renderer's declaration).
        event_index: event ``j`` of a history image, None for the current screen.
        sha256: content hash of the image.
    """

    start: int
    end: int
    role: Literal["history", "current"]
    event_index: int | None
    sha256: str

    @property
    def length(self) -> int:
        return self.end - self.start


@dataclass(frozen=True, slots=True)
class QwenTokens:
    """Ids of the tokens that frame images, and the vision merge size."""

    image_pad: int
    vision_start: int
    vision_end: int
    merge_size: int


@dataclass(frozen=True)
class EncodedPrompt:
    """One encoded prompt (no batch dimension).

    Attributes:
        input_ids: ``(seq,)`` token ids, ending with the generation prompt ``<|im_start|>assistant\\n``.
        attention_mask: ``(seq,)`` ones.
        pixel_values: ``(patches, channels * temporal_patch * patch**2)`` flattened patches, or None.
        image_grid_thw: ``(images, 3)`` patch grid per image (before merging), or None.
        mm_token_type_ids: ``(seq,)`` 1 on image tokens, 0 elsewhere, when the processor returns it.
        image_spans: one :class:`ImageSpan` per declared image, in prompt order.
        text: the chat-template output the ids were tokenized from.
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    mm_token_type_ids: torch.Tensor | None
    image_spans: tuple[ImageSpan, ...]
    text: str

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])


def find_image_spans(
    input_ids: Sequence[int],
    image_grid_thw: Sequence[Sequence[int]] | None,
    images: Sequence[ImageRef],
    tokens: QwenTokens,
    *,
    mm_token_type_ids: Sequence[int] | None = None,
) -> tuple[ImageSpan, ...]:
    """Match ``<|image_pad|>`` runs to declared images; raise :class:`ImageSpanMismatchError` on doubt.

    Checks: one run per declared image and per grid row; run ``i`` has ``prod(grid[i]) / merge**2``
    tokens; every run is framed by ``<|vision_start|>``/``<|vision_end|>``; no stray framing tokens;
    ``mm_token_type_ids`` (if given) is 1 exactly on the pad tokens.
    """
    ids = [int(t) for t in input_ids]
    grids = [tuple(int(v) for v in g) for g in (image_grid_thw if image_grid_thw is not None else [])]
    runs: list[tuple[int, int]] = []
    pos = 0
    while pos < len(ids):
        if ids[pos] == tokens.image_pad:
            start = pos
            while pos < len(ids) and ids[pos] == tokens.image_pad:
                pos += 1
            runs.append((start, pos))
        else:
            pos += 1
    if not (len(runs) == len(images) == len(grids)):
        raise ImageSpanMismatchError(
            f"the prompt declares {len(images)} images but the encoding has {len(runs)} <|image_pad|> runs "
            f"and {len(grids)} image_grid_thw rows; they must be equal (was an image token typed into a "
            "text part, or an image dropped by the processor?)"
        )
    for name, token in (("<|vision_start|>", tokens.vision_start), ("<|vision_end|>", tokens.vision_end)):
        count = ids.count(token)
        if count != len(images):
            raise ImageSpanMismatchError(
                f"the encoding has {count} {name} tokens for {len(images)} images; every image must be framed "
                "exactly once"
            )
    spans: list[ImageSpan] = []
    for i, ((start, end), grid, ref) in enumerate(zip(runs, grids, images, strict=True)):
        t, h, w = grid
        expected, rest = divmod(t * h * w, tokens.merge_size**2)
        if rest or end - start != expected:
            raise ImageSpanMismatchError(
                f"image {i} ({ref.role}, event {ref.event_index}) has {end - start} <|image_pad|> tokens but "
                f"image_grid_thw={list(grid)} with merge_size={tokens.merge_size} needs {t * h * w}/"
                f"{tokens.merge_size**2}; the processor and the model config disagree"
            )
        if (
            start == 0
            or ids[start - 1] != tokens.vision_start
            or end >= len(ids)
            or ids[end] != tokens.vision_end
        ):
            raise ImageSpanMismatchError(
                f"image {i} tokens [{start}, {end}) are not framed by <|vision_start|> ... <|vision_end|>; "
                "the chat template does not produce Qwen-VL image blocks"
            )
        spans.append(ImageSpan(start, end, ref.role, ref.event_index, ref.sha256))
    if mm_token_type_ids is not None:
        types = [int(v) for v in mm_token_type_ids]
        marked = {p for p, v in enumerate(types) if v != 0}
        pads = {p for s in spans for p in range(s.start, s.end)}
        if len(types) != len(ids) or marked != pads:
            raise ImageSpanMismatchError(
                f"mm_token_type_ids marks {len(marked)} image tokens but the spans hold {len(pads)} "
                f"(lengths {len(types)} vs {len(ids)} ids); the encoding is inconsistent"
            )
    return tuple(spans)


@cache
def image_only_processor_class(family: str) -> type:
    """The family's processor class restricted to an image processor and a tokenizer (no video)."""
    import transformers

    base = transformers.Qwen2_5_VLProcessor if family == "qwen2_5_vl" else transformers.Qwen3VLProcessor

    class ImageOnlyProcessor(base):  # type: ignore[misc, valid-type]
        @classmethod
        def get_attributes(cls) -> list[str]:
            return ["image_processor", "tokenizer"]

    ImageOnlyProcessor.__name__ = f"ImageOnly{base.__name__}"
    return ImageOnlyProcessor


def encode_prompt(prompt: BoundPrompt, processor: Any, tokens: QwenTokens) -> EncodedPrompt:
    """Encode ``prompt`` with the processor's chat template (generation prompt appended).

    The message layout is validated first (:func:`~causalcache_memory.runtime.hgkv.layout.check_prompt_layout`),
    so pixels are never paired with the wrong image role.
    """
    from causalcache_memory.runtime.hgkv.layout import check_prompt_layout

    check_prompt_layout(prompt)
    messages = qwen_messages(prompt)
    text = processor.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    images = prompt.pil_images()
    try:
        out = processor(text=[text], images=images or None, return_tensors="pt")
    except ValueError as exc:  # e.g. an image token typed into a text part
        raise ImageSpanMismatchError(
            f"the processor could not match the prompt's {len(images)} declared images to its image tokens: {exc}"
        ) from exc
    input_ids = out["input_ids"][0]
    grid = out.get("image_grid_thw")
    mm = out.get("mm_token_type_ids")
    mm = mm[0] if mm is not None else None
    spans = find_image_spans(
        input_ids.tolist(),
        grid.tolist() if grid is not None else None,
        prompt.images,
        tokens,
        mm_token_type_ids=mm.tolist() if mm is not None else None,
    )
    return EncodedPrompt(
        input_ids=input_ids,
        attention_mask=out["attention_mask"][0],
        pixel_values=out.get("pixel_values"),
        image_grid_thw=grid,
        mm_token_type_ids=mm,
        image_spans=spans,
        text=text,
    )


def history_token_mask(encoded: EncodedPrompt, length: int | None = None) -> torch.Tensor:
    """``(length,)`` bool, True exactly on the ``<|image_pad|>`` tokens of history images.

    ``length`` defaults to the prompt length; larger values pad with False (targets, padding).
    """
    import torch

    mask = torch.zeros(length if length is not None else encoded.length, dtype=torch.bool)
    for span in encoded.image_spans:
        if span.role == "history":
            mask[span.start : span.end] = True
    return mask


@dataclass(frozen=True)
class EncodedBatch:
    """Right-padded batch of encoded prompts, each optionally followed by target tokens.

    Attributes:
        input_ids: ``(batch, seq)``.
        attention_mask: ``(batch, seq)``, 0 on padding.
        pixel_values: all prompts' patches concatenated in batch order, or None.
        image_grid_thw: ``(total_images, 3)`` in batch order, or None.
        mm_token_type_ids: ``(batch, seq)`` (zeros on targets and padding), or None.
        prompts: the encoded prompts; their ``image_spans`` index this batch's rows directly.
        target_ranges: per row, the half-open token range ``[start, end)`` of the target (empty if none).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    pixel_values: torch.Tensor | None
    image_grid_thw: torch.Tensor | None
    mm_token_type_ids: torch.Tensor | None
    prompts: tuple[EncodedPrompt, ...]
    target_ranges: tuple[tuple[int, int], ...]

    def history_mask(self) -> torch.Tensor:
        """``(batch, seq)`` bool, True exactly on history-image tokens."""
        import torch

        width = int(self.input_ids.shape[1])
        return torch.stack([history_token_mask(p, width) for p in self.prompts])

    def model_inputs(self, device: Any = None) -> dict[str, Any]:
        """Keyword arguments for the model's ``forward``/``generate``."""
        inputs: dict[str, Any] = {"input_ids": self.input_ids, "attention_mask": self.attention_mask}
        for name in ("pixel_values", "image_grid_thw", "mm_token_type_ids"):
            value = getattr(self, name)
            if value is not None:
                inputs[name] = value
        if device is not None:
            inputs = {k: v.to(device) for k, v in inputs.items()}
        return inputs


def collate(
    prompts: Sequence[EncodedPrompt],
    targets: Sequence[Sequence[int]] | None = None,
    *,
    pad_token_id: int,
) -> EncodedBatch:
    """Batch ``prompts`` (each followed by ``targets[i]`` token ids), padded on the right."""
    import torch

    targets = targets if targets is not None else [[] for _ in prompts]
    if len(targets) != len(prompts):
        raise ValueError(f"collate got {len(prompts)} prompts but {len(targets)} targets")
    rows = [
        torch.cat([p.input_ids, torch.as_tensor(list(t), dtype=p.input_ids.dtype)])
        for p, t in zip(prompts, targets, strict=True)
    ]
    width = max(int(r.shape[0]) for r in rows)
    ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    attn = torch.zeros((len(rows), width), dtype=torch.long)
    has_mm = all(p.mm_token_type_ids is not None for p in prompts)
    mm = torch.zeros((len(rows), width), dtype=torch.long) if has_mm else None
    ranges = []
    for i, (row, prompt) in enumerate(zip(rows, prompts, strict=True)):
        ids[i, : row.shape[0]] = row
        attn[i, : row.shape[0]] = 1
        if mm is not None:
            mm[i, : prompt.length] = prompt.mm_token_type_ids  # type: ignore[assignment]
        ranges.append((prompt.length, int(row.shape[0])))
    pixels = [p.pixel_values for p in prompts if p.pixel_values is not None]
    grids = [p.image_grid_thw for p in prompts if p.image_grid_thw is not None]
    return EncodedBatch(
        input_ids=ids,
        attention_mask=attn,
        pixel_values=torch.cat(pixels) if pixels else None,
        image_grid_thw=torch.cat(grids) if grids else None,
        mm_token_type_ids=mm,
        prompts=tuple(prompts),
        target_ranges=tuple(ranges),
    )
