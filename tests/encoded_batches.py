"""A right-padded, prompt-only ``EncodedBatch`` built by hand from ``EncodedPrompt`` objects, for tests of
the HGKV gate that must not depend on the encoder's own collation (shared by tests/hgkv and
tests/reliability)."""

from __future__ import annotations

import torch

from causalcache_memory.runtime.qwen_encoding import EncodedBatch, EncodedPrompt


def prompt_only_batch(*prompts: EncodedPrompt) -> EncodedBatch:
    """Right-padded, prompt-only batch (no target tokens: the attention mask covers the prompt exactly)."""
    width = max(p.length for p in prompts)
    ids = torch.zeros(len(prompts), width, dtype=torch.long)
    mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, : p.length] = p.input_ids
        mask[r, : p.length] = 1
    grids = [p.image_grid_thw for p in prompts if p.image_grid_thw is not None]
    pixels = [p.pixel_values for p in prompts if p.pixel_values is not None]
    return EncodedBatch(
        input_ids=ids,
        attention_mask=mask,
        pixel_values=torch.cat(pixels) if pixels else None,
        image_grid_thw=torch.cat(grids) if grids else None,
        mm_token_type_ids=None,
        prompts=tuple(prompts),
        target_ranges=tuple((p.length, p.length) for p in prompts),
    )
