"""The server adapter: same K/V residual as the transformers HGKV adapter; mismatched adapters refused."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from adapter_files import write_adapter  # noqa: E402

from causalcache_memory.errors import ConfigError  # noqa: E402
from causalcache_memory.runtime.hgkv import HGKVAdapter, HGKVConfig  # noqa: E402
from causalcache_memory.runtime.sglang_server.adapter import ModelShape, load_server_adapter  # noqa: E402
from causalcache_memory.runtime.sglang_server.gating import ServerHGKV, kv_delta  # noqa: E402

SHAPE = ModelShape(model_type="qwen2_5_vl", num_layers=8, hidden_size=64, q_size=64, kv_size=32)


@pytest.fixture(scope="module")
def hf_model():
    config = transformers.Qwen2_5_VLConfig(
        text_config={
            "vocab_size": 128,
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_hidden_layers": 8,
            "num_attention_heads": 4,
            "num_key_value_heads": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 3, 3]},
        },
        vision_config={
            "depth": 1,
            "hidden_size": 32,
            "intermediate_size": 64,
            "num_heads": 2,
            "out_hidden_size": 64,
        },
    )
    torch.manual_seed(0)
    return transformers.Qwen2_5_VLForConditionalGeneration(config).eval()


@pytest.fixture(scope="module")
def saved(hf_model, tmp_path_factory):
    adapter = HGKVAdapter.attach(hf_model, HGKVConfig(r=8, alpha=16.0, num_layers=4))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for module in adapter.modules.values():
            module.B.copy_(torch.randn(module.B.shape, generator=gen) * 0.2)  # non-zero B
    out = adapter.save_pretrained(tmp_path_factory.mktemp("hgkv") / "adapter")
    return adapter, out


def test_gated_kv_delta_equals_the_transformers_adapter(hf_model, saved):
    adapter, directory = saved
    weights = load_server_adapter(directory, SHAPE)
    assert sorted(weights.layers) == list(adapter.config.layers)
    server = ServerHGKV(weights, q_size=SHAPE.q_size, kv_size=SHAPE.kv_size)
    layer_idx = adapter.config.layers[-1]
    attn = hf_model.model.language_model.layers[layer_idx].self_attn
    fused = torch.nn.Linear(64, 64 + 2 * 32)
    with torch.no_grad():
        fused.weight.copy_(
            torch.cat([attn.q_proj.weight, attn.k_proj.base_layer.weight, attn.v_proj.base_layer.weight])
        )
        fused.bias.copy_(
            torch.cat([attn.q_proj.bias, attn.k_proj.base_layer.bias, attn.v_proj.base_layer.bias])
        )
    server._params = dict(weights.layers)  # weights on CPU, no hooks: drive update() directly

    x = torch.randn(1, 20, 64, generator=torch.Generator().manual_seed(2))
    mask = torch.zeros(1, 20, dtype=torch.bool)
    mask[0, 5:12] = True
    rows = torch.arange(5, 12)
    with torch.no_grad():
        # the transformers adapter: HistoryGatedLinear under a history gate
        adapter.state.mask = mask
        try:
            k_hf, v_hf = attn.k_proj(x)[0], attn.v_proj(x)[0]
            adapter.state.prefilled.clear()
            delta_k_hf = attn.k_proj._delta(x)[0]
        finally:
            adapter.state.mask = None
        base = fused(x[0])
        qkv = base.clone()
        server.update(layer_idx, x[0], qkv, rows)
    a_k, b_k, _, _ = weights.layers[layer_idx]
    # the same function of the same hidden states and weights: bitwise the transformers residual
    assert torch.equal(kv_delta(x[0], a_k, b_k, weights.scaling), delta_k_hf)
    # on the gathered history rows only (what the server computes) the matmul shape differs: float32 noise
    torch.testing.assert_close(
        kv_delta(x[0, 5:12], a_k, b_k, weights.scaling), delta_k_hf[5:12], rtol=1e-6, atol=1e-7
    )
    k_srv, v_srv = qkv[:, 64:96], qkv[:, 96:128]
    assert torch.equal(k_srv[:5], base[:5, 64:96]) and torch.equal(k_srv[12:], base[12:, 64:96])
    assert torch.equal(qkv[:, :64], base[:, :64])  # Q untouched
    torch.testing.assert_close(k_srv, k_hf, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(v_srv, v_hf, rtol=1e-6, atol=1e-6)
    delta_rows = kv_delta(x[0, 5:12], a_k, b_k, weights.scaling)
    assert torch.equal(k_srv[5:12], base[5:12, 64:96] + delta_rows.to(base.dtype))
    assert not torch.equal(k_srv[5:12], base[5:12, 64:96])


@pytest.mark.parametrize(
    ("shape", "expect", "match"),
    [
        (ModelShape("qwen3_vl", 8, 64, 64, 32), None, "model_type"),
        (ModelShape("qwen2_5_vl", 12, 64, 64, 32), None, "num_hidden_layers"),
        (ModelShape("qwen2_5_vl", 8, 128, 64, 32), None, "shape"),
        (ModelShape("qwen2_5_vl", 8, 64, 64, 64), None, "kv width"),
        (ModelShape("qwen2_5_vl", 8, 64, 64, 32, tp_size=2), None, "tensor parallel"),
        (SHAPE, {"r": 16}, "r=8"),
        (SHAPE, {"alpha": 32}, "alpha=16"),
        (SHAPE, {"num_layers": 8}, "num_layers=4"),
    ],
)
def test_mismatched_adapter_is_refused(saved, shape, expect, match):
    with pytest.raises(ConfigError, match=match):
        load_server_adapter(saved[1], shape, expect=expect)


def test_layer_outside_the_model_and_ungated_control_are_refused(tmp_path):
    bad = write_adapter(tmp_path / "a", layers=(6, 9), num_layers=8, hidden=64, kv=32)
    with pytest.raises(ConfigError, match=r"layers \[9\] do not exist"):
        load_server_adapter(bad, SHAPE)
    ungated = write_adapter(tmp_path / "b", layers=(6, 7), num_layers=8, hidden=64, kv=32, gated=False)
    with pytest.raises(ConfigError, match="ungated control"):
        load_server_adapter(ungated, SHAPE)
    q = write_adapter(tmp_path / "c", layers=(6, 7), num_layers=8, hidden=64, kv=32, targets=("q_proj",))
    with pytest.raises(ConfigError, match="only k_proj and v_proj"):
        load_server_adapter(q, SHAPE)


def test_rank_mismatch_between_config_and_tensors_is_refused(tmp_path):
    out = write_adapter(tmp_path / "a", layers=(6, 7), num_layers=8, hidden=64, kv=32, r=8)
    peft = json.loads((out / "adapter_config.json").read_text())
    peft["r"] = 4
    (out / "adapter_config.json").write_text(json.dumps(peft))
    with pytest.raises(ConfigError, match="rank 4"):
        load_server_adapter(out, SHAPE)
