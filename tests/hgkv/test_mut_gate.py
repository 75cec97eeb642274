"""``build_history_gate`` and ``model_tokens`` on hand-built batches (no model): every cross-check of the
fail-closed gate refuses its own kind of disagreement, and valid batches of any size are gated exactly.

Each malformed batch below differs from a valid one in one respect only, and keeps every *other* source
consistent (for example a grid row added together with its pixel rows), so that only the check named
in the test can catch it.
"""

from __future__ import annotations

import re
from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from encoded_batches import prompt_only_batch as _batch

from causalcache_memory.errors import CausalCacheError, ImageSpanMismatchError
from causalcache_memory.runtime.hgkv.gate import build_history_gate, model_tokens
from causalcache_memory.runtime.qwen_encoding import EncodedBatch, EncodedPrompt, ImageSpan, QwenTokens

TOK = QwenTokens(image_pad=9, vision_start=7, vision_end=8, merge_size=2)
PATCH_DIM = 6  # pixel_values columns; deliberately unlike any patch-row count below


def _prompt(images: list[tuple[str, int | None]]) -> EncodedPrompt:
    """``[text, (<vs> <pad> <ve>) per image, text, text]``: one pad token per 1x2x2 grid (merge 2)."""
    ids, spans = [1], []
    for role, event in images:
        ids += [TOK.vision_start, TOK.image_pad, TOK.vision_end]
        spans.append(ImageSpan(len(ids) - 2, len(ids) - 1, role, event, "a" * 64))  # type: ignore[arg-type]
    ids += [2, 3]
    return EncodedPrompt(
        input_ids=torch.tensor(ids),
        attention_mask=torch.ones(len(ids), dtype=torch.long),
        pixel_values=torch.zeros(4 * len(images), PATCH_DIM) if images else None,
        image_grid_thw=torch.tensor([[1, 2, 2]] * len(images)) if images else None,
        mm_token_type_ids=None,
        image_spans=tuple(spans),
        text="",
    )


def _valid() -> EncodedBatch:
    return _batch(_prompt([("history", 2), ("history", 5), ("current", None)]))


def _refused(batch: EncodedBatch, match: str) -> None:
    with pytest.raises(ImageSpanMismatchError, match=match):
        build_history_gate(batch, TOK)


# ---------------------------------------------------------------- model_tokens
def _config(**changes):
    fields = {
        "image_token_id": 151655,
        "vision_start_token_id": 151652,
        "vision_end_token_id": 151653,
        "vision_config": SimpleNamespace(spatial_merge_size=2),
    }
    fields.update(changes)
    return SimpleNamespace(config=SimpleNamespace(**fields))


def test_model_tokens_reads_the_ids_and_merge_size_from_the_model_config() -> None:
    assert model_tokens(_config()) == QwenTokens(151655, 151652, 151653, 2)


@pytest.mark.parametrize(
    "model",
    [
        pytest.param(_config(vision_config=SimpleNamespace()), id="no spatial_merge_size (AttributeError)"),
        pytest.param(_config(image_token_id=None), id="image_token_id None (TypeError)"),
    ],
)
def test_a_model_that_is_not_qwen_vl_gets_the_named_gate_error(model) -> None:
    """A non-Qwen-VL config is a named library error (also a CausalCacheError), never a raw
    AttributeError/TypeError from deep inside the adapter."""
    with pytest.raises(ImageSpanMismatchError, match=re.escape("needs a Qwen2.5-VL/Qwen3-VL model")) as info:
        model_tokens(model)
    assert isinstance(info.value, CausalCacheError)


# ---------------------------------------------------------------- the renderer's role declaration
@pytest.mark.parametrize(
    "images",
    [
        pytest.param([("current", 1), ("history", None)], id="current before history, events swapped too"),
        pytest.param(
            [("history", 1), ("current", 2), ("current", None)], id="two current, one with an event"
        ),
    ],
)
def test_roles_need_exactly_one_current_image_last(images) -> None:
    """Retained-turn layout: the current screen is the last image and the only one. These declarations
    keep the event indices consistent, so only the role check can refuse them."""
    _refused(_batch(_prompt(images)), "exactly one 'current' image, the last one")


@pytest.mark.parametrize(
    "images",
    [
        pytest.param([("history", 1), ("current", 4)], id="current image with an event index"),
        pytest.param([("history", None), ("current", None)], id="history image without an event index"),
    ],
)
def test_each_event_index_rule_alone_is_enforced(images) -> None:
    """A history image is attributed to an event j; the current screen to none. Each rule on its own
    (with ascending, distinct indices otherwise) must refuse the row."""
    _refused(_batch(_prompt(images)), "distinct ascending event indices")


def test_the_event_error_names_the_current_images_event() -> None:
    """The message shows the history events and the *current* image's stray event index, to find the bug."""
    batch = _batch(_prompt([("history", 1), ("history", 2), ("current", 7)]))
    _refused(batch, re.escape("got history events [1, 2], current event 7"))


# ---------------------------------------------------------------- declared spans vs encoded runs
@pytest.mark.parametrize("shift", [-1, 1])
def test_declared_spans_shifted_either_way_are_refused(shift) -> None:
    """Declared spans must *equal* the re-derived ``<|image_pad|>`` runs, earlier or later alike."""
    batch = _valid()
    prompt = batch.prompts[0]
    spans = list(prompt.image_spans)
    spans[0] = replace(spans[0], start=spans[0].start + shift, end=spans[0].end + shift)
    bad = replace(batch, prompts=(replace(prompt, image_spans=tuple(spans)),))
    _refused(bad, "differ from the encoded")


# ---------------------------------------------------------------- batch geometry
def test_input_ids_must_be_batch_by_seq() -> None:
    """A 1-D id vector (even one as long as the number of prompts) or a 3-D tensor is refused."""
    two = _batch(_prompt([("history", 1), ("current", None)]), _prompt([]))
    _refused(replace(two, input_ids=two.input_ids[:, 0]), "input_ids shape")
    _refused(replace(two, input_ids=two.input_ids.unsqueeze(-1)), "input_ids shape")
    _refused(replace(two, input_ids=two.input_ids[:1]), "does not match 2 prompts")


def test_an_id_row_without_its_prompt_is_refused() -> None:
    """One id row per prompt. An extra text-only row (no images, so the grid and pixel counts still
    agree) would otherwise get no gate row at all: the gate would not even cover the batch."""
    two = _batch(_prompt([("history", 1), ("current", None)]), _prompt([]))
    _refused(replace(two, prompts=two.prompts[:1]), "does not match 1 prompts")


def test_grid_rows_must_match_the_declared_images_either_way() -> None:
    """One grid row per declared image: an extra or a missing grid row is refused even when the pixel
    rows were changed along with it (so the patch-count check alone cannot see it)."""
    batch = _valid()
    grid, pixels = batch.image_grid_thw, batch.pixel_values
    extra = replace(
        batch,
        image_grid_thw=torch.cat([grid, grid[:1]]),
        pixel_values=torch.cat([pixels, pixels[:4]]),
    )
    _refused(extra, "declare 3 images but image_grid_thw has 4 rows")
    missing = replace(batch, image_grid_thw=grid[:-1], pixel_values=pixels[:-4])
    _refused(missing, "declare 3 images but image_grid_thw has 2 rows")


def test_extra_pixel_rows_are_refused_and_counted_in_the_message() -> None:
    """``pixel_values`` must hold exactly ``sum prod(grid)`` patch rows; too many is as wrong as too few."""
    batch = _valid()
    bad = replace(batch, pixel_values=torch.zeros(16, PATCH_DIM))
    _refused(bad, "pixel_values has 16 patch rows but image_grid_thw describes 12")


def test_a_prompt_only_batch_is_gated_exactly() -> None:
    """At inference the batch holds the prompts alone (attended tokens == prompt length): allowed, and
    the gate is True exactly on the history images' pad tokens."""
    batch = _batch(_prompt([("history", 2), ("history", 5), ("current", None)]), _prompt([("current", None)]))
    gate = build_history_gate(batch, TOK)
    assert gate.nonzero().tolist() == [[0, 2], [0, 5]]


def test_a_batch_of_300_rows_is_gated_like_a_small_one() -> None:
    """Counts are compared by value: 300 rows, 600 images and 2 400 patch rows pass the checks (beyond
    CPython's small-int cache) and every row is gated on its history image."""
    batch = _batch(*[_prompt([("history", 1), ("current", None)]) for _ in range(300)])
    gate = build_history_gate(batch, TOK)
    assert gate.shape == (300, 9)
    assert gate[:, 2].all() and int(gate.sum()) == 300


def test_a_row_attending_fewer_tokens_than_its_prompt_is_refused() -> None:
    """The attention mask must cover the whole prompt: a gate over tokens the model does not attend to
    could not be attributed."""
    batch = _valid()
    mask = batch.attention_mask.clone()
    mask[0, -1] = 0
    _refused(replace(batch, attention_mask=mask), "11 attended tokens but the prompt has 12")
