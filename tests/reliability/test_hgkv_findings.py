"""Findings 12-13: adapter/model checks on load, the fail-closed mask validates the message layout.

``MALFORMED`` holds 70+ malformed prompt layouts derived from a valid retained-turn prompt; every one is
refused with a named error before pixels are paired with image roles.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from encoded_batches import prompt_only_batch as _batch  # noqa: E402

from causalcache_memory import Action, Trace, make_allocation  # noqa: E402
from causalcache_memory.errors import ConfigError, ImageSpanMismatchError  # noqa: E402
from causalcache_memory.render.messages import ImagePart, ImageRef, Message, RenderedPrompt, TextPart  # noqa: E402
from causalcache_memory.render.prompt import render_prompt  # noqa: E402
from causalcache_memory.runtime.hgkv.gate import build_history_gate, check_prompt_layout  # noqa: E402
from causalcache_memory.runtime.hgkv.layer import GateState, HistoryGatedLinear  # noqa: E402
from causalcache_memory.runtime.qwen_encoding import (  # noqa: E402
    EncodedPrompt,
    ImageSpan,
    QwenTokens,
    encode_prompt,
)

H = [f"{i:064x}" for i in range(1, 4)]
CUR = "f" * 64


def _valid() -> RenderedPrompt:
    """The retained-turn layout for S = {2, 4, 6}, t = 8 (see render/prompt.py)."""
    images = (ImageRef("history", H[0], 2), ImageRef("history", H[1], 4), ImageRef("history", H[2], 6))
    images += (ImageRef("current", CUR, None),)
    msgs = [Message("system", (TextPart("agent"),)), Message("user", (TextPart("goal and summaries"),))]
    for i, j in enumerate((2, 4, 6)):
        msgs.append(Message("assistant", (TextPart(f"response {j}"),)))
        msgs.append(Message("user", (TextPart(f"Screen after step {j}:"), ImagePart(i))))
    msgs.append(Message("user", (TextPart("Current screen:"), ImagePart(3), TextPart("next?"))))
    alloc = make_allocation((2, 4, 6), t=8, budget=3, allocator="test")
    return RenderedPrompt(tuple(msgs), images, alloc, goal="g")


def _with_parts(prompt: RenderedPrompt, edits: dict[int, tuple]) -> RenderedPrompt:
    msgs = list(prompt.messages)
    for m, parts in edits.items():
        msgs[m] = replace(msgs[m], parts=parts)
    return replace(prompt, messages=tuple(msgs))


def _set_index(prompt: RenderedPrompt, image: int, new: object) -> RenderedPrompt:
    msgs = []
    for msg in prompt.messages:
        parts = tuple(
            ImagePart(new) if isinstance(p, ImagePart) and p.image == image else p for p in msg.parts
        )  # type: ignore[arg-type]
        msgs.append(replace(msg, parts=parts))
    return replace(prompt, messages=tuple(msgs))


def _move(prompt: RenderedPrompt, image: int, to_message: int) -> RenderedPrompt:
    msgs = [list(m.parts) for m in prompt.messages]
    for parts in msgs:
        parts[:] = [p for p in parts if not (isinstance(p, ImagePart) and p.image == image)]
    msgs[to_message].append(ImagePart(image))
    return _with_parts(prompt, {m: tuple(p) for m, p in enumerate(msgs)})


def _set_ref(prompt: RenderedPrompt, image: int, **changes) -> RenderedPrompt:
    images = list(prompt.images)
    images[image] = replace(images[image], **changes)
    return replace(prompt, images=tuple(images))


def _malformed() -> dict[str, RenderedPrompt]:
    v = _valid()
    cases: dict[str, RenderedPrompt] = {}
    history_msgs, assistant_msgs, final = (3, 5, 7), (2, 4, 6), 8
    for i in range(3):
        cases[f"history {i} in its assistant turn"] = _move(v, i, assistant_msgs[i])
        cases[f"history {i} in the system message"] = _move(v, i, 0)
        cases[f"history {i} in the summaries message"] = _move(v, i, 1)
        cases[f"history {i} in the final message"] = _move(v, i, final)
        cases[f"history {i} without an event index"] = _set_ref(v, i, event_index=None)
        cases[f"history {i} declared current"] = _set_ref(v, i, role="current", event_index=None)
    for m in (0, 1, *assistant_msgs, *history_msgs):
        cases[f"current image in message {m}"] = _move(v, 3, m)
    cases["current declared history"] = _set_ref(v, 3, role="history", event_index=7)
    for a in range(4):
        for b in range(a + 1, 4):
            cases[f"parts {a} and {b} swapped"] = _set_index(_set_index(_set_index(v, a, 99), b, a), 99, b)
        for other in range(4):
            if other != a:
                cases[f"part {a} reuses image {other}"] = _set_index(v, a, other)
        for bad in (4, 9, -1, True):
            cases[f"part {a} names image {bad!r}"] = _set_index(v, a, bad)
        cases[f"part {a} dropped"] = _set_index(v, a, None)
    for a, b in ((0, 1), (1, 2), (0, 2)):
        ea, eb = v.images[a].event_index, v.images[b].event_index
        cases[f"events {a},{b} out of order"] = _set_ref(_set_ref(v, a, event_index=eb), b, event_index=ea)
    cases["duplicate event index"] = _set_ref(v, 1, event_index=2)
    cases["two history images in one turn"] = _move(v, 1, 3)
    cases["history image repeated in its turn"] = _with_parts(v, {3: (*v.messages[3].parts, ImagePart(0))})
    cases["extra part beyond the images"] = _with_parts(v, {final: (*v.messages[final].parts, ImagePart(4))})
    cases["first history turn without its response"] = _with_parts(
        replace(v, messages=v.messages[:2] + v.messages[3:]), {}
    )
    return cases


def _drop_none(prompt: RenderedPrompt) -> RenderedPrompt:
    msgs = [
        replace(m, parts=tuple(p for p in m.parts if not (isinstance(p, ImagePart) and p.image is None)))
        for m in prompt.messages
    ]
    return replace(prompt, messages=tuple(msgs))


MALFORMED = {name: _drop_none(p) for name, p in _malformed().items()}


def test_at_least_fifty_malformed_layouts():
    assert len(MALFORMED) >= 50


def test_the_valid_layout_and_real_renderer_output_pass():
    check_prompt_layout(_valid())
    trace = Trace("goal", episode_id="ep")
    trace.observe("0" * 64)
    for j in range(1, 8):
        trace.record(Action("type", text=str(j)), f"r{j}", f"{j:064x}")
    for selected in ((), (3,), (1, 4, 7), (5, 6, 7)):
        alloc = make_allocation(selected, t=trace.t, budget=len(selected), allocator="test")
        check_prompt_layout(render_prompt(trace, alloc))


@pytest.mark.parametrize("name", sorted(MALFORMED))
def test_malformed_layout_is_refused(name):
    with pytest.raises(ImageSpanMismatchError):
        check_prompt_layout(MALFORMED[name])


def test_out_of_range_part_is_a_named_error_when_encoding():
    """It used to surface as a bare IndexError from the pixel lookup; the layout check runs first."""
    prompt = _set_index(_valid(), 3, 7)
    with pytest.raises(ImageSpanMismatchError, match="naming image 7"):
        encode_prompt(prompt.bind(_NoArchive()), processor=None, tokens=None)


class _NoArchive:
    url = "none://"

    def __contains__(self, sha):
        return True


# ---------------------------------------------------------------- bypass rules of docs/HGKV.md
TOK = QwenTokens(image_pad=9, vision_start=7, vision_end=8, merge_size=2)


def _encoded(roles: list[str]) -> EncodedPrompt:
    ids, spans = [1], []
    for k, role in enumerate(roles):
        ids += [7, 9, 8]
        spans.append(
            ImageSpan(len(ids) - 2, len(ids) - 1, role, k + 1 if role == "history" else None, "a" * 64)
        )
    ids += [2, 3]
    n = len(ids)
    grid = torch.tensor([[1, 2, 2]] * len(roles)) if roles else None
    return EncodedPrompt(
        input_ids=torch.tensor(ids),
        attention_mask=torch.ones(n, dtype=torch.long),
        pixel_values=torch.zeros(4 * len(roles), 8) if roles else None,
        image_grid_thw=grid,
        mm_token_type_ids=None,
        image_spans=tuple(spans),
        text="",
    )


@pytest.mark.parametrize(
    "roles", [[], ["current"], ["current", "current"], ["current", "current", "current"]]
)
def test_prompts_without_history_bypass_instead_of_raising(roles):
    gate = build_history_gate(_batch(_encoded(roles)), TOK)
    assert not bool(gate.any())


def test_history_rows_are_gated_next_to_bypassed_rows():
    gate = build_history_gate(_batch(_encoded(["history", "current"]), _encoded([])), TOK)
    assert gate[0].nonzero().flatten().tolist() == [2] and not bool(gate[1].any())


def test_history_with_two_current_images_is_refused():
    with pytest.raises(ImageSpanMismatchError):
        build_history_gate(_batch(_encoded(["history", "current", "current"])), TOK)


# ---------------------------------------------------------------- a narrower second forward
def test_a_narrower_second_forward_in_one_context_raises():
    state = GateState()
    layer = HistoryGatedLinear(torch.nn.Linear(8, 8), r=2, alpha=4, gated=True, state=state)
    state.mask = torch.zeros(1, 10, dtype=torch.bool)
    state.mask[0, 3:5] = True
    layer(torch.randn(1, 10, 8))  # prefill over the gated batch
    step = torch.randn(1, 1, 8)
    assert torch.equal(layer(step), layer.base_layer(step))  # one cached decoding token: exact base
    with pytest.raises(ImageSpanMismatchError, match="does not run over the batch"):
        layer(torch.randn(1, 6, 8))  # another, narrower batch: never silently ungated


# ---------------------------------------------------------------- finding 12: model checks on load
def _tiny(family: str, layers: int):
    from causalcache_memory.runtime.tiny import _text_config, _vision_config

    cls = transformers.Qwen2_5_VLConfig if family == "qwen2_5_vl" else transformers.Qwen3VLConfig
    config = cls(text_config=_text_config(family, 400, layers), vision_config=_vision_config(family))
    return transformers.AutoModelForImageTextToText.from_config(config)


def test_adapter_refuses_a_model_with_another_layer_count_or_type(tmp_path):
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter

    torch.manual_seed(0)
    HGKVAdapter.attach(_tiny("qwen2_5_vl", 8)).save_pretrained(tmp_path / "ad")
    with pytest.raises(
        ConfigError, match="saved from a model with 8 language-model layers, but this model has 12"
    ):
        HGKVAdapter.load(tmp_path / "ad", model=_tiny("qwen2_5_vl", 12))
    with pytest.raises(ConfigError, match="saved from a 'qwen2_5_vl' model, this one is 'qwen3_vl'"):
        HGKVAdapter.load(tmp_path / "ad", model=_tiny("qwen3_vl", 8))
    adapter = HGKVAdapter.load(tmp_path / "ad", model=_tiny("qwen2_5_vl", 8))
    assert adapter.config.layers == tuple(range(8))
