"""HGKV adapter on the tiny Qwen2.5-VL: placement, bitwise bypass, gating, gradients, runtime arms.

Tests taking the ``kernel`` fixture run twice: with the torch path and with the fused Triton kernel
selected (``CAUSALCACHE_HGKV_KERNEL=triton``, Triton's CPU interpreter; skipped without triton).
"""

from __future__ import annotations

import pytest
import torch
from kernel_modes import KERNEL_MODES, select_kernel

from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.errors import ConfigError
from causalcache_memory.render.prompt import RenderOptions, render_prompt
from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter, HGKVConfig
from causalcache_memory.runtime.hgkv.layer import HistoryGatedLinear
from causalcache_memory.runtime.qwen_encoding import collate

OPTS = RenderOptions(system_prompt="GUI agent.")


def _prompts(recall_data, selected_fn, n: int):
    """``n`` prompts over trajectories/decisions; ``selected_fn(t)`` gives the history events."""
    out = []
    for _k, traj in enumerate(recall_data["trajectories"]):
        for t in (3, 5, 8):
            sel = selected_fn(t)
            alloc = make_allocation(sel, t=t, budget=len(sel), allocator="test")
            out.append(render_prompt(traj.trace_at(t), alloc, options=OPTS).bind(recall_data["archive"]))
            if len(out) == n:
                return out
    return out


def _logits(policy, prompts):
    batch = collate([policy.encode(p) for p in prompts], pad_token_id=policy.pad_token_id)
    with torch.no_grad(), policy.forward_context(batch):
        out = policy.model(**batch.model_inputs(), use_cache=False).logits
    return out, batch


@pytest.fixture(params=KERNEL_MODES)
def kernel(request, monkeypatch) -> str:
    select_kernel(monkeypatch, request.param)
    return request.param


@pytest.fixture
def frozen(load_policy):
    return load_policy()


@pytest.fixture
def adapted(load_policy, randomize):
    policy = load_policy()
    policy.adapter = HGKVAdapter.attach(policy.model)
    randomize(policy.adapter)
    return policy


def test_wraps_k_and_v_of_the_last_eight_layers(load_policy) -> None:
    policy = load_policy()
    n_layers = len(policy.model.model.language_model.layers)
    adapter = HGKVAdapter.attach(policy.model)
    expected = {
        f"model.language_model.layers.{i}.self_attn.{p}"
        for i in range(n_layers - 8, n_layers)
        for p in ("k_proj", "v_proj")
    }
    assert set(adapter.modules) == expected
    wrapped = {n for n, m in policy.model.named_modules() if isinstance(m, HistoryGatedLinear)}
    assert wrapped == expected  # the vision tower is untouched
    layer = adapter.modules["model.language_model.layers.7.self_attn.k_proj"]
    assert layer.A.shape == (8, 64) and layer.B.shape == (32, 8) and layer.scaling == 2.0
    assert torch.count_nonzero(layer.B) == 0 and torch.count_nonzero(layer.A) > 0
    trainable = {id(p) for p in policy.model.parameters() if p.requires_grad}
    assert trainable == {id(p) for p in adapter.parameters()}


def test_no_history_image_is_bitwise_the_frozen_policy(frozen, adapted, recall_data, kernel) -> None:
    prompts = _prompts(recall_data, lambda t: (), 24)
    for lo in range(0, len(prompts), 8):
        base, _ = _logits(frozen, prompts[lo : lo + 8])
        mine, _ = _logits(adapted, prompts[lo : lo + 8])
        assert torch.equal(base, mine)
    assert frozen.score(prompts[:4], ["click red"] * 4) == adapted.score(prompts[:4], ["click red"] * 4)
    # the adapter is really active when a history image is present
    hist = _prompts(recall_data, lambda t: (t - 1,), 2)
    assert not torch.equal(_logits(frozen, hist)[0], _logits(adapted, hist)[0])


def test_positions_before_the_first_history_token_are_bitwise_equal(
    frozen, adapted, recall_data, kernel
) -> None:
    prompts = _prompts(recall_data, lambda t: (1, t - 1), 4)
    base, batch = _logits(frozen, prompts)
    mine, _ = _logits(adapted, prompts)
    for row, prompt in enumerate(batch.prompts):
        first = min(s.start for s in prompt.image_spans if s.role == "history")
        assert torch.equal(base[row, :first], mine[row, :first])
        assert not torch.equal(base[row, first:], mine[row, first:])


def test_gate_is_per_sample_in_a_batch(frozen, adapted, recall_data, kernel) -> None:
    empty = _prompts(recall_data, lambda t: (), 2)
    hist = _prompts(recall_data, lambda t: (t - 1,), 2)
    mixed = [empty[0], hist[0], empty[1], hist[1]]
    base, batch = _logits(frozen, mixed)
    mine, _ = _logits(adapted, mixed)
    mask = batch.history_mask()
    assert mask[0].sum() == 0 and mask[1].sum() == 4
    assert torch.equal(base[0], mine[0]) and torch.equal(base[2], mine[2])
    assert not torch.equal(base[1], mine[1])


def test_gradients_reach_only_adapter_weights(adapted, recall_data, make_scorer, kernel) -> None:
    scorer = make_scorer(adapted)
    scores = scorer.scores(recall_data["groups"][:2], grad=True)
    scores.sum().backward()
    adapter_ids = {id(p) for p in adapted.adapter.parameters()}
    for name, p in adapted.model.named_parameters():
        if id(p) in adapter_ids:
            assert p.grad is not None and torch.count_nonzero(p.grad) > 0, name
        else:
            assert p.grad is None, name


def test_kernel_matches_the_torch_path_on_history_prompts(adapted, recall_data, monkeypatch) -> None:
    pytest.importorskip("triton", reason="the fused HGKV kernel needs triton (`pip install triton`)")
    from causalcache_memory.runtime.hgkv import layer as layer_mod

    prompts = _prompts(recall_data, lambda t: (1, t - 1), 3)
    select_kernel(monkeypatch, "torch")
    ref, batch = _logits(adapted, prompts)
    select_kernel(monkeypatch, "triton")
    launches = []
    real = layer_mod.fused_lowrank_update
    monkeypatch.setattr(
        layer_mod, "fused_lowrank_update", lambda *a, **k: (launches.append(1), real(*a, **k))
    )
    mine, _ = _logits(adapted, prompts)
    assert len(launches) == len(adapted.adapter.modules)  # one launch per wrapped projection
    torch.testing.assert_close(mine, ref, rtol=1e-4, atol=1e-4)
    for row, prompt in enumerate(batch.prompts):
        first = min(s.start for s in prompt.image_spans if s.role == "history")
        assert torch.equal(mine[row, :first], ref[row, :first])


def test_ungated_control_is_active_on_every_token(frozen, load_policy, randomize, recall_data) -> None:
    policy = load_policy()
    adapter = HGKVAdapter.attach(policy.model, HGKVConfig(gated=False))
    policy.adapter = adapter
    randomize(adapter)
    prompts = _prompts(recall_data, lambda t: (), 2)
    base, _ = _logits(frozen, prompts)
    assert not torch.equal(base, _logits(policy, prompts)[0])
    with adapter.disable_adapter():
        assert torch.equal(base, _logits(policy, prompts)[0])
    with pytest.raises(RuntimeError, match="boom"), adapter.disable_adapter():
        raise RuntimeError("boom")
    assert adapter.state.disabled is False  # restored in finally


def test_disable_adapter_is_the_frozen_arm(frozen, adapted, recall_data) -> None:
    prompts = _prompts(recall_data, lambda t: (1, t - 1), 3)
    with adapted.adapter.disable_adapter():
        mine, _ = _logits(adapted, prompts)
    assert torch.equal(_logits(frozen, prompts)[0], mine)
    assert adapted.adapter.state.mask is None


def test_generate_runs_with_the_gate_and_decoding_steps(adapted, recall_data) -> None:
    prompt = _prompts(recall_data, lambda t: (t - 1,), 1)[0]
    gen = adapted.generate(prompt)
    assert gen.meta["completion_tokens"] >= 1
    assert adapted.adapter.state.mask is None


def test_nested_contexts_and_foreign_models_are_refused(adapted, frozen, recall_data) -> None:
    prompts = _prompts(recall_data, lambda t: (t - 1,), 1)
    batch = collate([adapted.encode(p) for p in prompts], pad_token_id=adapted.pad_token_id)
    with adapted.adapter.forward_context(adapted.model, batch):
        with pytest.raises(ConfigError, match="nested"):
            with adapted.adapter.forward_context(adapted.model, batch):
                pass
    with pytest.raises(ConfigError, match="another model"):
        with adapted.adapter.forward_context(frozen.model, batch):
            pass


def test_config_validation_lists_every_problem() -> None:
    with pytest.raises(ConfigError) as info:
        HGKVConfig(r=0, alpha=-1, target_modules=("qkv",))
    assert len(info.value.errors) == 3


def test_qwen3_vl_parity_and_gating(tmp_path_factory, recall_data, randomize) -> None:
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl
    from causalcache_memory.runtime.transformers_policy import TransformersPolicy

    path = build_tiny_qwen_vl(tmp_path_factory.mktemp("hgkv-qwen3") / "q3", family="qwen3_vl")
    frozen = TransformersPolicy.from_pretrained(path)
    policy = TransformersPolicy.from_pretrained(path)
    policy.adapter = HGKVAdapter.attach(policy.model)
    assert len(policy.adapter.modules) == 16
    randomize(policy.adapter)
    empty = _prompts(recall_data, lambda t: (), 8)
    assert torch.equal(_logits(frozen, empty)[0], _logits(policy, empty)[0])
    hist = _prompts(recall_data, lambda t: (t - 1,), 2)
    base, batch = _logits(frozen, hist)
    mine, _ = _logits(policy, hist)
    first = min(s.start for s in batch.prompts[0].image_spans if s.role == "history")
    assert torch.equal(base[0, :first], mine[0, :first]) and not torch.equal(base, mine)
