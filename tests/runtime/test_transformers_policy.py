"""TransformersPolicy on tiny offline Qwen-VL models: loading, generation, teacher-forced scoring, spans."""

from __future__ import annotations

import contextlib
import itertools
import json
import shutil
from dataclasses import replace

import pytest

import causalcache_memory.actions as actions_pkg
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ActionParseError, ConfigError, ImageSpanMismatchError, PolicyError
from causalcache_memory.policy import Generation, Policy
from causalcache_memory.runtime.qwen_encoding import collate, find_image_spans, history_token_mask
from causalcache_memory.runtime.transformers_policy import TransformersPolicy

torch = pytest.importorskip("torch")

TARGET = "pyautogui.click(x=0.5, y=0.25)"


# ---------------------------------------------------------------------- loading
def test_from_pretrained_round_trip(tiny_dir, policy) -> None:
    again = TransformersPolicy.from_pretrained(str(tiny_dir))
    assert isinstance(again, Policy)
    assert again.family == "qwen2_5_vl" and again.name == f"transformers:{tiny_dir.name}"
    for (name, a), (_, b) in zip(
        policy.model.state_dict().items(), again.model.state_dict().items(), strict=True
    ):
        assert torch.equal(a, b), name
    assert again.tokens.image_pad == policy.model.config.image_token_id
    assert again.tokens.merge_size == 2


def test_unsupported_model_type_lists_supported_families(tiny_dir, tmp_path) -> None:
    bad = tmp_path / "llama"
    shutil.copytree(tiny_dir, bad)
    config = json.loads((bad / "config.json").read_text())
    config["model_type"] = "llama"
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"model_type='llama'.*qwen2_5_vl, qwen3_vl"):
        TransformersPolicy.from_pretrained(bad)


def test_missing_path_asks_for_a_local_directory(tmp_path) -> None:
    with pytest.raises(ConfigError, match="local model directory"):
        TransformersPolicy.from_pretrained(tmp_path / "Qwen" / "Qwen2.5-VL-7B-Instruct")


# ---------------------------------------------------------------------- generation
def test_generate_returns_text_and_never_raises_on_garbage(policy, make_prompt, monkeypatch) -> None:
    def reject(text, **kwargs):
        raise ActionParseError(f"cannot parse {text!r}")

    monkeypatch.setattr(actions_pkg, "parse_action", reject, raising=False)
    gen = policy.generate(make_prompt((4, 5)))
    assert isinstance(gen, Generation) and isinstance(gen.response, str)
    assert gen.action is None and gen.parse_error and "cannot parse" in gen.parse_error
    assert 1 <= gen.meta["completion_tokens"] <= policy.max_new_tokens
    again = policy.generate(make_prompt((4, 5)))
    assert again.response == gen.response  # greedy


def test_generate_passes_platform_and_screen_size_to_the_parser(policy, make_prompt, monkeypatch) -> None:
    seen = {}

    def accept(text, *, platform, screen_size):
        seen.update(platform=platform, screen_size=screen_size, text=text)
        return Action("wait")

    monkeypatch.setattr(actions_pkg, "parse_action", accept, raising=False)
    monkeypatch.setattr(policy, "screen_size", (1280, 800))
    gen = policy.generate(make_prompt(()))
    assert gen.action == Action("wait") and gen.parse_error is None
    assert seen == {"platform": "auto", "screen_size": (1280, 800), "text": gen.response}


# ---------------------------------------------------------------------- scoring
@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_score_in_batch_equals_score_alone(policies, make_prompt, family) -> None:
    policy = policies[family]
    prompts = [make_prompt((5, 6)), make_prompt((1, 2, 3, 4)), make_prompt(())]
    targets = [TARGET, "a much longer target response that pads the other rows", "wait"]
    batched = policy.score(prompts, targets)
    alone = [policy.score([p], [t])[0] for p, t in zip(prompts, targets, strict=True)]
    assert batched == pytest.approx(alone, abs=1e-4)
    assert all(s < 0 for s in batched)
    assert policy.score(prompts, targets, batch_size=2) == pytest.approx(batched, abs=1e-4)


def test_score_is_the_mean_over_exactly_the_target_tokens(policy, make_prompt) -> None:
    prompt = make_prompt((2, 5))
    enc = policy.encode(prompt)
    text_ids = policy.tokenizer(TARGET, add_special_tokens=False)["input_ids"]
    target = torch.tensor([*text_ids, policy.im_end_id])
    assert policy.target_ids(TARGET) == target.tolist()
    ids = torch.cat([enc.input_ids, target])[None]
    mm = torch.cat([enc.mm_token_type_ids, torch.zeros_like(target)])[None]
    with torch.no_grad():
        logits = policy.model(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            pixel_values=enc.pixel_values,
            image_grid_thw=enc.image_grid_thw,
            mm_token_type_ids=mm,
        ).logits
    logp = torch.log_softmax(logits.float(), -1)[0]
    start = enc.length
    manual = [logp[p - 1, ids[0, p]].item() for p in range(start, start + len(text_ids) + 1)]
    assert policy.score([prompt], [TARGET])[0] == pytest.approx(sum(manual) / len(manual), abs=1e-5)
    # including one prompt token (or dropping <|im_end|>) would give a different number
    off_by_one = [logp[p - 1, ids[0, p]].item() for p in range(start - 1, start + len(text_ids))]
    assert abs(sum(off_by_one) / len(off_by_one) - sum(manual) / len(manual)) > 1e-4


def test_prompts_differing_only_in_history_images_score_differently(policy, make_prompt) -> None:
    prompts = [make_prompt((1, 2)), make_prompt((5, 6)), make_prompt((1, 2))]
    assert [p.prompt.structure() for p in prompts[:2]] == [prompts[0].prompt.structure()] * 2
    scores = policy.score(prompts, [TARGET] * 3)
    assert scores[0] == pytest.approx(scores[2], abs=1e-6)
    assert abs(scores[0] - scores[1]) > 1e-6


def test_score_rejects_mismatched_lengths(policy, make_prompt) -> None:
    with pytest.raises(PolicyError, match="1 prompts but 2 targets"):
        policy.score([make_prompt(())], ["a", "b"])


# ---------------------------------------------------------------------- image spans
@pytest.mark.parametrize("selected", [(), (6,), (1, 3, 4, 6)])
def test_image_spans_follow_the_declaration(policy, make_prompt, selected) -> None:
    prompt = make_prompt(selected)
    enc = policy.encode(prompt)
    spans = enc.image_spans
    assert [s.role for s in spans] == ["history"] * len(selected) + ["current"]
    assert [s.event_index for s in spans] == [*selected, None]
    assert [s.sha256 for s in spans] == [ref.sha256 for ref in prompt.images]
    assert all(a.end < b.start for a, b in itertools.pairwise(spans))
    ids = enc.input_ids
    for span, grid in zip(spans, enc.image_grid_thw.tolist(), strict=True):
        assert span.length == grid[0] * grid[1] * grid[2] // 4
        assert (ids[span.start : span.end] == policy.tokens.image_pad).all()
    mask = history_token_mask(enc)
    assert mask.shape == ids.shape and mask.dtype == torch.bool
    expected = torch.zeros_like(mask)
    for span in spans[:-1]:
        expected[span.start : span.end] = True
    assert torch.equal(mask, expected)
    assert int(mask.sum()) == sum(s.length for s in spans if s.role == "history")
    assert int((ids == policy.tokens.image_pad).sum()) == int(mask.sum()) + spans[-1].length


def test_batch_history_mask_rows_match_each_prompt(policy, make_prompt) -> None:
    encoded = [policy.encode(make_prompt(s)) for s in [(), (2, 4)]]
    batch = collate(encoded, [[1, 2, 3], [4]], pad_token_id=policy.pad_token_id)
    mask = batch.history_mask()
    assert mask.shape == batch.input_ids.shape
    assert not mask[0].any()
    assert torch.equal(mask[1, : encoded[1].length], history_token_mask(encoded[1]))
    assert not mask[1, encoded[1].length :].any()


def _spans(policy, enc, images, ids=None, grid=None, mm=None):
    return find_image_spans(
        (enc.input_ids if ids is None else ids).tolist(),
        (enc.image_grid_thw if grid is None else grid).tolist(),
        images,
        policy.tokens,
        mm_token_type_ids=None if mm is None else mm.tolist(),
    )


def test_tampered_encodings_fail_closed(policy, make_prompt) -> None:
    prompt = make_prompt((2, 5))
    enc = policy.encode(prompt)
    images = prompt.images
    assert len(_spans(policy, enc, images, mm=enc.mm_token_type_ids)) == 3
    first = enc.image_spans[0]
    dropped = torch.cat([enc.input_ids[: first.start], enc.input_ids[first.start + 1 :]])
    with pytest.raises(ImageSpanMismatchError, match="image 0"):
        _spans(policy, enc, images, ids=dropped)
    with pytest.raises(ImageSpanMismatchError, match="declares 4 images"):
        _spans(policy, enc, (*images, replace(images[0], event_index=9)))
    split = enc.input_ids.clone()
    split[first.start + 3] = policy.tokens.vision_end
    with pytest.raises(ImageSpanMismatchError):
        _spans(policy, enc, images, ids=split)
    unframed = enc.input_ids.clone()
    unframed[first.start - 1] = policy.pad_token_id
    with pytest.raises(ImageSpanMismatchError, match="vision_start"):
        _spans(policy, enc, images, ids=unframed)
    grid = enc.image_grid_thw.clone()
    grid[1, 1] += 2
    with pytest.raises(ImageSpanMismatchError, match="image 1"):
        _spans(policy, enc, images, grid=grid)
    mm = enc.mm_token_type_ids.clone()
    mm[first.start - 1] = 1
    with pytest.raises(ImageSpanMismatchError, match="mm_token_type_ids"):
        _spans(policy, enc, images, mm=mm)


def test_image_token_typed_into_text_fails_closed(policy, episode) -> None:
    from causalcache_memory.allocation.base import make_allocation
    from causalcache_memory.render import render_prompt
    from causalcache_memory.trace import Trace

    _, archive = episode
    trace = Trace("type <|image_pad|> into the box")
    trace.observe(next(iter(archive.blobs)))
    prompt = render_prompt(trace, make_allocation([], t=1, budget=2, allocator="t")).bind(archive)
    with pytest.raises(ImageSpanMismatchError, match="1 declared images"):
        policy.encode(prompt)


# ---------------------------------------------------------------------- adapter hook
class _BumpLogit:
    """Test adapter: adds ``delta`` to one vocabulary logit while its context is held."""

    def __init__(self, token: int, delta: float) -> None:
        self.token, self.delta, self.calls = token, delta, []

    def forward_context(self, model, batch):
        self.calls.append((model, batch))

        def hook(module, args, output):
            output = output.clone()
            output[..., self.token] += self.delta
            return output

        handle = model.lm_head.register_forward_hook(hook)
        return contextlib.closing(_Remover(handle))


class _Remover:
    def __init__(self, handle) -> None:
        self.handle = handle

    def close(self) -> None:
        self.handle.remove()


def test_adapter_context_wraps_every_forward_and_is_removed(policy, make_prompt, monkeypatch) -> None:
    prompt = make_prompt((3, 4))
    base = policy.score([prompt], [TARGET])[0]
    adapter = _BumpLogit(policy.im_end_id, 5.0)
    monkeypatch.setattr(policy, "adapter", adapter)
    gated = policy.score([prompt], [TARGET])[0]
    assert gated != pytest.approx(base, abs=1e-4)
    model, batch = adapter.calls[-1]
    assert model is policy.model
    assert batch.history_mask().shape == batch.input_ids.shape and int(batch.history_mask().sum()) > 0
    policy.generate(prompt)
    assert (
        len(adapter.calls) == 2
        and adapter.calls[-1][1].target_ranges[0][0] == adapter.calls[-1][1].prompts[0].length
    )
    monkeypatch.setattr(policy, "adapter", None)
    assert policy.score([prompt], [TARGET])[0] == pytest.approx(base, abs=1e-6)


# ---------------------------------------------------------------------- CUDA
@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("family", ["qwen2_5_vl", "qwen3_vl"])
def test_cuda_scores_and_generation_match_cpu(tiny_dirs, policies, make_prompt, family) -> None:
    gpu = TransformersPolicy.from_pretrained(
        tiny_dirs[family], device="cuda", dtype="float32", max_new_tokens=8
    )
    prompts = [make_prompt((5, 6)), make_prompt((1, 2, 3, 4)), make_prompt(())]
    targets = [TARGET, "a longer target response", "wait"]
    assert gpu.score(prompts, targets) == pytest.approx(policies[family].score(prompts, targets), abs=1e-3)
    assert isinstance(gpu.generate(prompts[0]).response, str)
