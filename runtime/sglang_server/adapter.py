"""Load an HGKV adapter directory for the server and check it against the served model (no ``sglang``).

The directory is the one :meth:`~causalcache_memory.runtime.hgkv.HGKVAdapter.save_pretrained` writes
(``adapter_model.safetensors`` + ``adapter_config.json`` + ``hgkv_config.json``); the weights are read with
:func:`causalcache_memory.runtime.hgkv.io.read_adapter`. The server adds the residuals to the K and V column
slices of each adapted layer's fused ``qkv_proj`` output, so only ``k_proj``/``v_proj`` targets are served.
Loading refuses, before any request is served, an adapter whose model type, layer count, layer indices,
rank, alpha (the scale ``alpha / r``) or tensor shapes do not match the model, an ungated control (merge it
into the base weights instead) and tensor parallelism.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from causalcache_memory.errors import ConfigError

__all__ = ["ModelShape", "ServerAdapterWeights", "load_server_adapter"]

_KEY = re.compile(r"\.layers\.(\d+)\.self_attn\.(k_proj|v_proj)\.lora_([AB])\.weight$")


@dataclass(frozen=True)
class ModelShape:
    """What the served model looks like.

    Attributes:
        model_type: ``hf_config.model_type`` (``qwen2_5_vl`` or ``qwen3_vl``).
        num_layers: language-model decoder layers.
        hidden_size: input width of ``qkv_proj``.
        q_size, kv_size: widths of the Q and of each of the K/V column slices of the ``qkv_proj`` output.
        tp_size: tensor-parallel degree (only 1 is supported).
    """

    model_type: str
    num_layers: int
    hidden_size: int
    q_size: int
    kv_size: int
    tp_size: int = 1


@dataclass(frozen=True)
class ServerAdapterWeights:
    """Per-layer ``(A_k, B_k, A_v, B_v)`` float32 tensors and the scale ``alpha / r``.

    ``A_*``: ``(r, hidden_size)``; ``B_*``: ``(kv_size, r)``.
    """

    layers: dict[int, tuple[Any, Any, Any, Any]]
    r: int
    alpha: float
    directory: str

    @property
    def scaling(self) -> float:
        return self.alpha / self.r


def _expectations(expect: dict[str, Any] | None, config: Any, problems: list[str]) -> None:
    for field, actual in (("r", config.r), ("alpha", config.alpha), ("num_layers", len(config.layers or ()))):
        if expect and expect.get(field) is not None and float(expect[field]) != float(actual):
            problems.append(f"{field}={actual} but the server was started expecting {field}={expect[field]}")


def load_server_adapter(
    directory: str | Path, shape: ModelShape, *, expect: dict[str, Any] | None = None
) -> ServerAdapterWeights:
    """Read ``directory`` and validate it against ``shape`` (and optional ``expect``: r, alpha, num_layers).

    Raises:
        ConfigError: listing every mismatch at once.
    """
    import json

    from causalcache_memory.runtime.hgkv.io import HGKV_CONFIG, read_adapter

    config, tensors = read_adapter(directory)
    meta = json.loads((Path(directory) / HGKV_CONFIG).read_text(encoding="utf-8"))
    problems: list[str] = []
    if not config.gated:
        problems.append(
            "the adapter is the ungated control (gated=false); merge it into the base weights "
            "(HGKVAdapter.merge) and serve the merged model with stock SGLang"
        )
    if shape.tp_size != 1:
        problems.append(f"tensor parallel size {shape.tp_size} is not supported (serve with --tp-size 1)")
    if meta.get("model_type") != shape.model_type:
        problems.append(f"model_type={meta.get('model_type')!r} but the server runs {shape.model_type!r}")
    if meta.get("num_hidden_layers") != shape.num_layers:
        problems.append(
            f"num_hidden_layers={meta.get('num_hidden_layers')} but the served model has {shape.num_layers}"
        )
    bad_targets = sorted(set(config.target_modules) - {"k_proj", "v_proj"})
    if bad_targets:
        problems.append(f"target_modules {bad_targets} cannot be served (only k_proj and v_proj)")
    layers = tuple(sorted(config.layers or ()))
    outside = [i for i in layers if not 0 <= i < shape.num_layers]
    if outside:
        problems.append(f"layers {outside} do not exist in a model with {shape.num_layers} layers")
    _expectations(expect, config, problems)

    found: dict[tuple[int, str, str], Any] = {}
    for key, value in tensors.items():
        match = _KEY.search(key)
        if match is None:
            problems.append(f"unexpected tensor {key}")
            continue
        found[(int(match[1]), match[2], match[3])] = value
    for i in layers:
        for target in config.target_modules:
            for part, want in (("A", (config.r, shape.hidden_size)), ("B", (shape.kv_size, config.r))):
                value = found.pop((i, target, part), None)
                if value is None:
                    problems.append(f"layer {i} {target} lora_{part} is missing")
                elif tuple(value.shape) != want:
                    problems.append(
                        f"layer {i} {target} lora_{part} has shape {tuple(value.shape)} but the model needs "
                        f"{want} (rank {config.r}, hidden {shape.hidden_size}, kv width {shape.kv_size})"
                    )
    if found:
        problems.append(f"tensors for layers outside {list(layers)}: {sorted(found)[:4]}")
    if problems:
        raise ConfigError(
            f"HGKV adapter {directory} does not fit the served model: " + "; ".join(problems), problems
        )
    out = {}
    for i in layers:
        k = tensors_for(tensors, i, "k_proj") or (None, None)
        v = tensors_for(tensors, i, "v_proj") or (None, None)
        out[i] = (*k, *v)
    return ServerAdapterWeights(out, config.r, config.alpha, str(directory))


def tensors_for(tensors: dict[str, Any], layer: int, target: str) -> tuple[Any, Any] | None:
    """``(A, B)`` float32 of one wrapped projection, or None when the adapter does not target it."""
    a = b = None
    for key, value in tensors.items():
        match = _KEY.search(key)
        if match and int(match[1]) == layer and match[2] == target:
            if match[3] == "A":
                a = value
            else:
                b = value
    if a is None or b is None:
        return None
    return a.float().contiguous(), b.float().contiguous()
