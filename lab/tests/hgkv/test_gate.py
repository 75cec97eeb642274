"""The history gate is exact on valid batches and fails closed on malformed layouts (fuzzed)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch

from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.errors import ImageSpanMismatchError
from causalcache_memory.render.prompt import RenderOptions, render_prompt
from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter
from causalcache_memory.runtime.hgkv.gate import build_history_gate, model_tokens
from causalcache_memory.runtime.qwen_encoding import ImageSpan, collate


@pytest.fixture(scope="module")
def policy(tiny_dir):
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    return TransformersPolicy.from_pretrained(tiny_dir)


@pytest.fixture(scope="module")
def batch(policy, recall_data):
    trajs, archive = recall_data["trajectories"], recall_data["archive"]
    prompts = []
    for traj, sel in ((trajs[0], (2, 6)), (trajs[1], ()), (trajs[2], (1, 4, 7))):
        alloc = make_allocation(sel, t=8, budget=len(sel), allocator="test")
        bound = render_prompt(traj.trace_at(8), alloc, options=RenderOptions(system_prompt="x")).bind(archive)
        prompts.append(policy.encode(bound))
    targets = [policy.target_ids("click red")] * 3
    return collate(prompts, targets, pad_token_id=policy.pad_token_id)


def test_gate_is_true_exactly_on_history_image_tokens(policy, batch) -> None:
    gate = build_history_gate(batch, model_tokens(policy.model))
    assert torch.equal(gate, batch.history_mask())
    assert gate.sum(dim=1).tolist() == [8, 0, 12]  # 4 tokens per 56x56 image
    for row, prompt in enumerate(batch.prompts):
        current = prompt.image_spans[-1]
        assert current.role == "current" and not gate[row, current.start : current.end].any()
        start, end = batch.target_ranges[row]
        assert not gate[row, start:end].any()
        for span in prompt.image_spans:
            assert not gate[row, span.start - 1] and not gate[row, span.end]  # framing tokens


def _set_prompt(batch, row, prompt):
    prompts = list(batch.prompts)
    prompts[row] = prompt
    return replace(batch, prompts=tuple(prompts))


def _set_ids(batch, row, pos, value, mm=None):
    ids = batch.input_ids.clone()
    ids[row, pos] = value
    out = replace(batch, input_ids=ids)
    if mm is not None and batch.mm_token_type_ids is not None:
        types = batch.mm_token_type_ids.clone()
        types[row, pos] = mm
        out = replace(out, mm_token_type_ids=types)
    return out


def _mutations(batch, tokens, rng: random.Random):
    """Named malformed variants of ``batch``; every one must be refused."""
    row = rng.choice([0, 2])
    prompt = batch.prompts[row]
    hist = [i for i, s in enumerate(prompt.image_spans) if s.role == "history"]
    h = prompt.image_spans[rng.choice(hist)]
    spans = list(prompt.image_spans)
    grid = batch.image_grid_thw
    yield "grid row dropped", replace(batch, image_grid_thw=grid[:-1])
    yield "pixel rows dropped", replace(batch, pixel_values=batch.pixel_values[:-4])
    yield "grid row added", replace(batch, image_grid_thw=torch.cat([grid, grid[:1]]))
    bigger = grid.clone()
    bigger[rng.randrange(len(grid)), 2] *= 2
    yield "patch geometry changed", replace(batch, image_grid_thw=bigger)
    yield "run truncated", _set_ids(batch, row, h.end - 1, 100, mm=0)
    yield "run truncated, mm kept", _set_ids(batch, row, rng.randrange(h.start, h.end), 100)
    start, end = batch.target_ranges[row]
    yield "image pad in target", _set_ids(batch, row, rng.randrange(start, end), tokens.image_pad, mm=1)
    yield (
        "mm type flipped",
        replace(batch, mm_token_type_ids=_flip(batch.mm_token_type_ids, row, rng.randrange(0, h.start - 1))),
    )
    extra = ImageSpan(h.start, h.end, "history", 99, h.sha256)
    yield "extra declared image", _set_prompt(batch, row, replace(prompt, image_spans=(extra, *spans)))
    yield "declared image missing", _set_prompt(batch, row, replace(prompt, image_spans=tuple(spans[1:])))
    swapped = list(spans)
    i = hist[rng.randrange(len(hist))]
    swapped[i], swapped[-1] = (
        replace(spans[i], role="current", event_index=None),
        replace(spans[-1], role="history", event_index=42),
    )
    yield "history/current role swap", _set_prompt(batch, row, replace(prompt, image_spans=tuple(swapped)))
    shifted = list(spans)
    shifted[hist[0]] = replace(spans[hist[0]], start=spans[hist[0]].start + 1, end=spans[hist[0]].end + 1)
    yield "declared span shifted", _set_prompt(batch, row, replace(prompt, image_spans=tuple(shifted)))
    dup = list(spans)
    if len(hist) >= 2:
        dup[hist[1]] = replace(spans[hist[1]], event_index=spans[hist[0]].event_index)
        yield "duplicate history event", _set_prompt(batch, row, replace(prompt, image_spans=tuple(dup)))
    yield "vision_end removed", _set_ids(batch, row, h.end, 100)
    yield "rows and prompts differ", replace(batch, prompts=batch.prompts[:2])


def _flip(types, row, pos):
    out = types.clone()
    out[row, pos] = 1 - out[row, pos]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_malformed_layouts_raise(policy, batch, seed) -> None:
    tokens = model_tokens(policy.model)
    names = []
    for name, bad in _mutations(batch, tokens, random.Random(seed)):
        with pytest.raises(ImageSpanMismatchError):
            build_history_gate(bad, tokens)
        names.append(name)
    assert len(names) >= 14


def test_malformed_batch_aborts_the_forward_pass(policy, batch, monkeypatch) -> None:
    tokens = model_tokens(policy.model)
    bad = replace(batch, image_grid_thw=batch.image_grid_thw[:-1])
    calls = []
    adapter = HGKVAdapter.attach(policy.model)
    try:
        monkeypatch.setattr(policy.model, "forward", lambda *a, **k: calls.append(1))
        policy.adapter = adapter
        with pytest.raises(ImageSpanMismatchError, match="image_grid_thw"):
            policy.target_logprobs(bad)
        assert calls == [] and adapter.state.mask is None
        assert build_history_gate(batch, tokens).any()
    finally:
        policy.adapter = None
        adapter.detach()


def test_gate_shape_mismatch_inside_the_model_raises(policy, batch) -> None:
    adapter = HGKVAdapter.attach(policy.model)
    try:
        adapter.state.mask = torch.ones((3, 5), dtype=torch.bool)
        with pytest.raises(ImageSpanMismatchError, match="gate has shape"):
            policy.model(**batch.model_inputs(), use_cache=False)
    finally:
        adapter.state.mask = None
        adapter.detach()
