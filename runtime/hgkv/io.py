"""Adapter files: a peft-compatible LoRA layout plus the HGKV gate metadata.

A directory holds

* ``adapter_model.safetensors``: ``base_model.model.<module>.lora_A.weight`` ``(r, in_dim)`` and
  ``...lora_B.weight`` ``(out_dim, r)`` for every wrapped projection (peft's key names);
* ``adapter_config.json``: peft ``LoraConfig`` fields (``peft_type: LORA``, ``r``, ``lora_alpha``,
  ``target_modules``, ``layers_to_transform``, ``layers_pattern``), so peft can load the weights;
* ``hgkv_config.json``: what peft cannot express: ``gated`` (the history-token gate), the layer indices
  and the format version. peft ignores it: a gated adapter loaded by plain peft is *not* gated.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    import torch

    from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter
    from causalcache_memory.runtime.hgkv.config import HGKVConfig

__all__ = ["HGKV_FORMAT_VERSION", "check_tensors", "read_adapter", "read_model_facts", "save_adapter"]

HGKV_FORMAT_VERSION = 1
WEIGHTS = "adapter_model.safetensors"
PEFT_CONFIG = "adapter_config.json"
HGKV_CONFIG = "hgkv_config.json"


def save_adapter(adapter: HGKVAdapter, directory: str | Path) -> Path:
    from causalcache_memory.runtime.hgkv.config import language_layers

    safetensors_torch = require("safetensors.torch", purpose="saving HGKV adapters")
    if adapter.model is None:
        raise ConfigError("the adapter is not attached to a model yet; attach or use it once before saving")
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    cfg = adapter.config
    layers = list(cfg.layers or ())
    safetensors_torch.save_file(adapter.state_dict(), str(out / WEIGHTS), metadata={"format": "pt"})
    model_config = getattr(adapter.model, "config", None)
    peft_config = {
        "peft_type": "LORA",
        "task_type": None,
        "base_model_name_or_path": getattr(model_config, "_name_or_path", None) or None,
        "r": cfg.r,
        "lora_alpha": cfg.alpha,
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": False,
        "target_modules": list(cfg.target_modules),
        "layers_to_transform": layers,
        "layers_pattern": "layers",
        "init_lora_weights": True,
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
        "inference_mode": True,
    }
    hgkv = {
        "format_version": HGKV_FORMAT_VERSION,
        "gated": cfg.gated,
        "gate": "history_image_tokens" if cfg.gated else "all_tokens",
        "layers": layers,
        "num_hidden_layers": len(language_layers(adapter.model)[1]),
        "model_type": getattr(model_config, "model_type", None),
        "modules": sorted(adapter.modules),
    }
    (out / PEFT_CONFIG).write_text(json.dumps(peft_config, indent=2) + "\n", encoding="utf-8")
    (out / HGKV_CONFIG).write_text(json.dumps(hgkv, indent=2) + "\n", encoding="utf-8")
    return out


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise ConfigError(
            f"{path} is missing; an HGKV adapter directory needs {WEIGHTS}, {PEFT_CONFIG}, {HGKV_CONFIG}"
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a JSON object")
    return data


def read_adapter(directory: str | Path) -> tuple[HGKVConfig, dict[str, torch.Tensor]]:
    """The adapter's config and its peft-style tensors (not yet attached to a model).

    Every field is type-checked (``lora_alpha`` finite and > 0, ``r`` >= 1); every tensor must be a
    finite 2-D float tensor named ``...lora_A.weight`` ``(r, in_dim)`` or ``...lora_B.weight``
    ``(out_dim, r)`` with the config's ``r``; a truncated or corrupt ``adapter_model.safetensors`` is a
    :class:`ConfigError` naming the file. :func:`read_model_facts` gives the model the adapter was saved
    from.
    """
    from causalcache_memory.runtime.hgkv.config import HGKVConfig

    safetensors_torch = require("safetensors.torch", purpose="loading HGKV adapters")
    root = Path(directory)
    peft_cfg = _read_json(root / PEFT_CONFIG)
    hgkv = _read_json(root / HGKV_CONFIG)
    if hgkv.get("format_version") != HGKV_FORMAT_VERSION:
        raise ConfigError(
            f"{root / HGKV_CONFIG}: format_version={hgkv.get('format_version')!r} is not supported "
            f"(expected {HGKV_FORMAT_VERSION})"
        )
    if peft_cfg.get("peft_type") != "LORA":
        raise ConfigError(f"{root / PEFT_CONFIG}: peft_type={peft_cfg.get('peft_type')!r} must be 'LORA'")
    layers = _int_list(
        hgkv.get("layers") or peft_cfg.get("layers_to_transform") or [], root / HGKV_CONFIG, "layers"
    )
    if not layers:
        raise ConfigError(f"{root / HGKV_CONFIG}: 'layers' is empty; cannot place the adapter")
    gated = hgkv.get("gated")
    if not isinstance(gated, bool):
        raise ConfigError(f"{root / HGKV_CONFIG}: gated={gated!r} must be true or false")
    targets = peft_cfg.get("target_modules")
    if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
        raise ConfigError(f"{root / PEFT_CONFIG}: target_modules={targets!r} must be a list of names")
    try:
        config = HGKVConfig(
            r=_number(peft_cfg.get("r"), root / PEFT_CONFIG, "r", int),
            alpha=float(_number(peft_cfg.get("lora_alpha"), root / PEFT_CONFIG, "lora_alpha", (int, float))),
            num_layers=len(layers),
            target_modules=tuple(targets),
            gated=gated,
            layers=tuple(layers),
        )
    except ConfigError as exc:
        raise ConfigError(f"{root}: {exc}", exc.errors) from None
    weights = root / WEIGHTS
    if not weights.is_file():
        raise ConfigError(f"{weights} is missing")
    try:
        tensors = dict(safetensors_torch.load_file(str(weights)))
    except Exception as exc:  # safetensors raises its own SafetensorError (not an OSError) for bad files
        raise ConfigError(
            f"{weights} cannot be read ({type(exc).__name__}: {exc}); the file is truncated or corrupt, "
            "save the adapter again"
        ) from exc
    check_tensors(tensors, config.r, source=str(weights))
    return config, tensors


def check_tensors(tensors: dict[str, torch.Tensor], r: int, *, source: str) -> None:
    """Names, shapes (rank ``r``) and finiteness of peft-style LoRA tensors; raises :class:`ConfigError`."""
    import torch

    problems: list[str] = []
    for key, value in tensors.items():
        part = "A" if key.endswith(".lora_A.weight") else "B" if key.endswith(".lora_B.weight") else None
        if part is None or not key.startswith("base_model.model."):
            problems.append(f"{key}: not a peft LoRA weight name (base_model.model.<module>.lora_A/B.weight)")
        elif value.dim() != 2 or not value.is_floating_point():
            problems.append(f"{key}: {value.dim()}-D {value.dtype} tensor; LoRA weights are 2-D float")
        elif value.shape[0 if part == "A" else 1] != r:
            want = "(r, in_dim)" if part == "A" else "(out_dim, r)"
            problems.append(f"{key}: shape {tuple(value.shape)} is not {want} for rank {r} (r={r})")
        elif not bool(torch.isfinite(value).all()):
            bad = int((~torch.isfinite(value)).sum())
            problems.append(f"{key}: {bad} of {value.numel()} values are NaN or infinite")
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ConfigError(f"{source}: invalid adapter weights: " + "; ".join(problems[:3]) + more, problems)


def read_model_facts(directory: str | Path) -> dict[str, Any]:
    """``num_hidden_layers`` and ``model_type`` of the model the adapter was saved from.

    Both are required (``save_adapter`` writes them): without them the adapter's layer indices could not
    be checked and would land on the wrong layers of a deeper model.
    """
    path = Path(directory) / HGKV_CONFIG
    hgkv = _read_json(path)
    layers = hgkv.get("num_hidden_layers")
    model_type = hgkv.get("model_type")
    fix = "save the adapter again with HGKVAdapter.save_pretrained, or add the field of the model it was trained on"
    if isinstance(layers, bool) or not isinstance(layers, int) or layers < 1:
        raise ConfigError(
            f"{path}: num_hidden_layers={layers!r} must be the positive layer count of the model the adapter "
            f"was saved from; {fix}"
        )
    if not isinstance(model_type, str) or not model_type:
        raise ConfigError(
            f"{path}: model_type={model_type!r} must name the model family the adapter was saved from "
            f"(e.g. 'qwen2_5_vl'); {fix}"
        )
    return {"num_hidden_layers": layers, "model_type": model_type, "source": str(path)}


def _int_list(value: Any, path: Path, name: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in value):
        raise ConfigError(f"{path}: {name}={value!r} must be a list of layer indices")
    return list(value)


def _number(value: Any, path: Path, name: str, kind: type | tuple[type, ...]) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise ConfigError(f"{path}: {name}={value!r} must be a number")
    return value
