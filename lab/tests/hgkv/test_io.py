"""Adapter files (peft layout + gate metadata), loading through the runtime, merging rules."""

from __future__ import annotations

import json

import pytest
import torch

from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.errors import ConfigError
from causalcache_memory.render.prompt import RenderOptions, render_prompt
from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter, HGKVConfig, resolve_adapter


@pytest.fixture
def prompts(recall_data):
    archive = recall_data["archive"]
    out = []
    for traj, sel in zip(recall_data["trajectories"][:3], ((2, 6), (), (7,)), strict=True):
        alloc = make_allocation(sel, t=8, budget=len(sel), allocator="test")
        out.append(
            render_prompt(traj.trace_at(8), alloc, options=RenderOptions(system_prompt="x")).bind(archive)
        )
    return out


def _saved(load_policy, randomize, tmp_path, gated=True):
    policy = load_policy()
    adapter = HGKVAdapter.attach(policy.model, HGKVConfig(gated=gated))
    randomize(adapter)
    policy.adapter = adapter
    return policy, adapter, adapter.save_pretrained(tmp_path / ("hgkv" if gated else "ungated"))


def test_safetensors_round_trip_through_the_runtime(load_policy, randomize, tmp_path, prompts) -> None:
    policy, adapter, path = _saved(load_policy, randomize, tmp_path)
    assert {p.name for p in path.iterdir()} == {
        "adapter_model.safetensors",
        "adapter_config.json",
        "hgkv_config.json",
    }
    peft_cfg = json.loads((path / "adapter_config.json").read_text())
    assert peft_cfg["peft_type"] == "LORA" and peft_cfg["r"] == 8 and peft_cfg["lora_alpha"] == 16
    assert peft_cfg["target_modules"] == ["k_proj", "v_proj"] and peft_cfg["layers_to_transform"] == list(
        range(8)
    )
    meta = json.loads((path / "hgkv_config.json").read_text())
    assert meta["gated"] is True and meta["format_version"] == 1
    loaded = resolve_adapter(str(path))  # loaded from a path, attached lazily by the runtime's forward hook
    assert (
        isinstance(loaded, HGKVAdapter)
        and resolve_adapter(loaded) is loaded
        and resolve_adapter(None) is None
    )
    with pytest.raises(ConfigError, match="adapter=3"):
        resolve_adapter(3)
    again = load_policy(adapter=loaded)
    targets = ["click red", "click blue", "click pink"]
    assert again.score(prompts, targets) == policy.score(prompts, targets)
    for key, value in adapter.state_dict().items():
        assert torch.equal(loaded.state_dict()[key], value), key
    with loaded.disable_adapter():
        frozen = again.score(prompts, targets)
    assert frozen == load_policy().score(prompts, targets)
    assert frozen[1] == policy.score(prompts, targets)[1]  # B = 0 prompt: bitwise the frozen policy
    by_path = load_policy(adapter=str(path))  # the runtime resolves an adapter directory itself
    assert by_path.score(prompts, targets) == policy.score(prompts, targets)


@pytest.mark.filterwarnings("ignore:.*is_gradient_checkpointing.*:FutureWarning")
def test_peft_reads_the_same_weights(load_policy, randomize, tmp_path) -> None:
    peft = pytest.importorskip("peft")
    _, adapter, path = _saved(load_policy, randomize, tmp_path)
    model = load_policy().model
    peft_model = peft.PeftModel.from_pretrained(model, str(path))
    names = {
        n for n, _ in peft_model.named_modules() if n.endswith(("k_proj", "v_proj")) and hasattr(_, "lora_A")
    }
    assert len(names) == 16
    for name, module in adapter.modules.items():
        peft_module = peft_model.get_submodule(f"base_model.model.{name}")
        assert torch.equal(peft_module.lora_A["default"].weight, module.A)
        assert torch.equal(peft_module.lora_B["default"].weight, module.B)


def test_loading_into_a_model_of_another_shape_fails_clearly(
    load_policy, randomize, tmp_path, tiny_dir
) -> None:
    import transformers

    _, _, path = _saved(load_policy, randomize, tmp_path)
    config = transformers.AutoConfig.from_pretrained(tiny_dir)
    config.text_config.num_key_value_heads = 1  # k_proj/v_proj: 64 -> 16 outputs
    other = transformers.AutoModelForImageTextToText.from_config(config)
    with pytest.raises(ConfigError, match=r"shape \(32, 8\) but this model needs \(16, 8\)"):
        HGKVAdapter.load(path, model=other)
    meta = json.loads((path / "hgkv_config.json").read_text())
    meta["layers"] = [20, 21]
    (path / "hgkv_config.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match=r"layers \[20, 21\] do not exist"):
        HGKVAdapter.load(path, model=load_policy().model)
    meta["format_version"] = 7
    (path / "hgkv_config.json").write_text(json.dumps(meta))
    with pytest.raises(ConfigError, match="format_version=7"):
        HGKVAdapter.load(path)


def test_a_gated_adapter_refuses_to_merge(load_policy, randomize, tmp_path) -> None:
    _, adapter, _ = _saved(load_policy, randomize, tmp_path)
    before = [m.base_layer.weight.clone() for m in adapter.modules.values()]
    with pytest.raises(ConfigError, match="cannot be merged"):
        adapter.merge()
    assert all(
        torch.equal(b, m.base_layer.weight) for b, m in zip(before, adapter.modules.values(), strict=True)
    )


def test_the_ungated_control_merges_to_the_same_function(load_policy, randomize, tmp_path, prompts) -> None:
    policy, adapter, _ = _saved(load_policy, randomize, tmp_path, gated=False)
    targets = ["click red"] * 3
    unmerged = torch.tensor(policy.score(prompts, targets))
    adapter.merge()
    merged = torch.tensor(policy.score(prompts, targets))
    assert torch.allclose(unmerged, merged, atol=1e-4)
    adapter.detach()  # unmerges and restores the original projections
    policy.adapter = None
    assert policy.score(prompts, targets) == load_policy().score(prompts, targets)
