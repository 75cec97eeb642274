"""Findings 12-13: adapter/model checks on load, the fail-closed mask validates the message layout.

``MALFORMED`` holds 70+ malformed prompt layouts derived from a valid retained-turn prompt; every one is
refused with a named error before pixels are paired with image roles.
"""

from __future__ import annotations

import math
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


# ---------------------------------------------------------------- issue 27, finding 6: adapter files and gate
@pytest.fixture(scope="module")
def saved_adapter(tmp_path_factory):
    """An adapter saved from an 8-layer tiny Qwen2.5-VL, with non-zero weights."""
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter

    torch.manual_seed(0)
    adapter = HGKVAdapter.attach(_tiny("qwen2_5_vl", 8))
    with torch.no_grad():
        for p in adapter.parameters():
            p.normal_(0, 0.1)
    return adapter.save_pretrained(tmp_path_factory.mktemp("hgkv-finding6") / "ad")


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def _edit_json(path, **changes):
    import json

    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is _DROP:
            data.pop(key, None)
        else:
            data[key] = value
    path.write_text(json.dumps(data))


_DROP = object()


def _edit_weights(directory, edit):
    from safetensors.torch import load_file, save_file

    path = directory / "adapter_model.safetensors"
    tensors = load_file(str(path))
    edit(tensors)
    save_file(tensors, str(path), metadata={"format": "pt"})


def _first(tensors, part="lora_B"):
    return next(k for k in sorted(tensors) if part in k)


@pytest.mark.parametrize(
    "case",
    ["lora_alpha NaN", "lora_alpha Infinity", "NaN weight", "Inf weight", "huge r", "truncated weights"],
)
def test_a_corrupt_adapter_is_refused_when_read_naming_the_file(saved_adapter, tmp_path, case):
    """These loaded silently (all-NaN logits) or failed with a bare SafetensorError / a 256 GB allocation."""
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter

    ad = _copy(saved_adapter, tmp_path / "ad")
    if case.startswith("lora_alpha"):
        (ad / "adapter_config.json").write_text(
            (ad / "adapter_config.json")
            .read_text()
            .replace('"lora_alpha": 16.0', f'"lora_alpha": {case.split()[1]}')
        )
        expected = "alpha=.* must be a finite number"
    elif case.endswith("weight"):
        value = math.nan if case.startswith("NaN") else math.inf
        _edit_weights(ad, lambda t: t[_first(t)].view(-1).__setitem__(3, value))
        expected = "1 of .* values are NaN or infinite"
    elif case == "huge r":
        _edit_json(ad / "adapter_config.json", r=1_000_000_000)
        expected = r"is not \(r, in_dim\) for rank 1000000000"
    else:
        weights = ad / "adapter_model.safetensors"
        weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
        expected = "truncated or corrupt"
    with pytest.raises(ConfigError, match=expected) as info:
        HGKVAdapter.load(ad)
    assert str(ad) in str(info.value)


def test_a_huge_rank_is_refused_before_allocating(saved_adapter):
    """r = 10**9 on a 64-wide projection used to try to allocate 256 GB before any shape check."""
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter, HGKVConfig

    model = _tiny("qwen2_5_vl", 8)
    before = {n: type(m).__name__ for n, m in model.named_modules()}
    with pytest.raises(ConfigError, match="r=1000000000 is larger than"):
        HGKVAdapter.attach(model, HGKVConfig(r=1_000_000_000))
    assert {n: type(m).__name__ for n, m in model.named_modules()} == before  # nothing was wrapped


def test_non_finite_tensors_are_refused_by_load_state_dict(saved_adapter):
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter
    from causalcache_memory.runtime.hgkv.io import read_adapter

    adapter = HGKVAdapter.load(saved_adapter, model=_tiny("qwen2_5_vl", 8))
    _, tensors = read_adapter(saved_adapter)
    tensors[_first(tensors, "lora_A")][0, 0] = math.inf
    with pytest.raises(ConfigError, match="NaN or infinite"):
        adapter.load_state_dict(tensors)


@pytest.mark.parametrize("missing", ["num_hidden_layers", "model_type"])
def test_hgkv_config_without_model_facts_is_refused(saved_adapter, tmp_path, missing):
    """It used to attach to the first 8 layers of a deeper model without any check."""
    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter

    ad = _copy(saved_adapter, tmp_path / "ad")
    _edit_json(ad / "hgkv_config.json", **{missing: _DROP})
    with pytest.raises(ConfigError, match=f"hgkv_config.json: {missing}=None must"):
        HGKVAdapter.load(ad, model=_tiny("qwen2_5_vl", 12))


def test_from_pretrained_checks_an_adapter_directory_against_the_model(saved_adapter, tmp_path):
    """An adapter directory used to be checked against the model only at the first forward pass."""
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    deeper = build_tiny_qwen_vl(tmp_path / "deeper", family="qwen2_5_vl", num_layers=12)
    with pytest.raises(
        ConfigError, match="saved from a model with 8 language-model layers, but this model has 12"
    ):
        TransformersPolicy.from_pretrained(deeper, adapter=saved_adapter)
    same = build_tiny_qwen_vl(tmp_path / "same", family="qwen2_5_vl", num_layers=8)
    policy = TransformersPolicy.from_pretrained(same, adapter=saved_adapter)
    assert (
        policy.adapter.model is policy.model and len(policy.adapter.modules) == 16
    )  # attached at construction


@pytest.mark.parametrize("token", [TOK.image_pad, TOK.vision_start, TOK.vision_end])
def test_an_image_token_in_the_right_padding_is_refused_by_the_gate(token):
    """It passed the gate and failed later inside transformers with an unnamed ValueError."""
    batch = _batch(_encoded(["history", "current"]), _encoded([]))
    real = int(batch.attention_mask[1].sum())
    assert batch.input_ids.shape[1] > real  # row 1 is right-padded
    build_history_gate(batch, TOK)  # the clean batch passes
    batch.input_ids[1, -1] = token
    with pytest.raises(
        ImageSpanMismatchError, match=r"batch row 1: token \d+ at position \d+ is an image token"
    ):
        build_history_gate(batch, TOK)


def test_an_attended_token_after_the_padding_is_refused_by_the_gate():
    batch = _batch(_encoded(["history", "current"]), _encoded([]))
    batch.attention_mask[1, -1] = 1
    batch.attention_mask[1, 0] = 0
    with pytest.raises(ImageSpanMismatchError, match="not right padding"):
        build_history_gate(batch, TOK)
