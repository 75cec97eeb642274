"""Write HGKV adapter directories in the project's saved format without a transformers model (tests)."""

from __future__ import annotations

import json
from pathlib import Path

import torch


def write_adapter(
    out: Path,
    *,
    layers: tuple[int, ...],
    num_layers: int,
    hidden: int,
    kv: int,
    r: int = 8,
    alpha: float = 16.0,
    model_type: str = "qwen2_5_vl",
    gated: bool = True,
    scale: float = 0.3,
    seed: int = 0,
    targets: tuple[str, ...] = ("k_proj", "v_proj"),
) -> Path:
    from safetensors.torch import save_file

    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    modules = []
    for i in layers:
        for t in targets:
            name = f"model.language_model.layers.{i}.self_attn.{t}"
            modules.append(name)
            tensors[f"base_model.model.{name}.lora_A.weight"] = torch.randn(r, hidden, generator=gen) * scale
            tensors[f"base_model.model.{name}.lora_B.weight"] = torch.randn(kv, r, generator=gen) * scale
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"))
    peft = {
        "peft_type": "LORA",
        "r": r,
        "lora_alpha": alpha,
        "target_modules": list(targets),
        "layers_to_transform": list(layers),
    }
    hgkv = {
        "format_version": 1,
        "gated": gated,
        "layers": list(layers),
        "num_hidden_layers": num_layers,
        "model_type": model_type,
        "modules": sorted(modules),
    }
    (out / "adapter_config.json").write_text(json.dumps(peft))
    (out / "hgkv_config.json").write_text(json.dumps(hgkv))
    return out
