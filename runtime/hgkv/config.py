"""HGKV adapter shape (:class:`HGKVConfig`) and where a Qwen-VL model keeps its decoder layers."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from causalcache_memory.errors import ConfigError

__all__ = ["HGKVConfig", "language_layers"]


@dataclass(frozen=True)
class HGKVConfig:
    """Adapter shape.

    Attributes:
        r: rank of each residual.
        alpha: LoRA alpha; the residual is scaled by ``alpha / r``.
        num_layers: how many of the *last* language-model layers are adapted.
        target_modules: attention projections wrapped in each layer.
        gated: True for HGKV (history-token gate), False for the ungated control.
        layers: explicit layer indices (overrides ``num_layers``; set when loading a saved adapter).
    """

    r: int = 8
    alpha: float = 16.0
    num_layers: int = 8
    target_modules: tuple[str, ...] = ("k_proj", "v_proj")
    gated: bool = True
    layers: tuple[int, ...] | None = field(default=None)

    def __post_init__(self) -> None:
        errors = []
        if not _is_int(self.r) or self.r < 1:
            errors.append(f"r={self.r!r} must be an integer >= 1")
        if (
            isinstance(self.alpha, bool)
            or not isinstance(self.alpha, (int, float))
            or not math.isfinite(self.alpha)
            or self.alpha <= 0
        ):
            errors.append(
                f"alpha={self.alpha!r} must be a finite number > 0 (the residual is scaled by alpha / r)"
            )
        if not _is_int(self.num_layers) or self.num_layers < 1:
            errors.append(f"num_layers={self.num_layers!r} must be an integer >= 1")
        if self.layers is not None and not all(_is_int(i) for i in self.layers):
            errors.append(f"layers={list(self.layers)!r} must be layer indices (integers)")
        bad = [t for t in self.target_modules if t not in ("q_proj", "k_proj", "v_proj", "o_proj")]
        if bad or not self.target_modules:
            errors.append(f"target_modules={list(self.target_modules)} must name attention projections")
        if errors:
            raise ConfigError("invalid HGKVConfig: " + "; ".join(errors), errors)

    def check_rank(self, name: str, in_features: int, out_features: int) -> None:
        """Refuse a rank no projection of this shape can have, before any adapter weight is allocated."""
        if self.r > min(in_features, out_features):
            raise ConfigError(
                f"r={self.r} is larger than {name} allows ({in_features} -> {out_features} features, so a "
                f"rank of at most {min(in_features, out_features)}); the adapter files are corrupt or were made "
                "for another model"
            )

    def resolve_layers(self, total: int) -> tuple[int, ...]:
        if self.layers is not None:
            bad = [i for i in self.layers if not 0 <= i < total]
            if bad:
                raise ConfigError(
                    f"adapter layers {bad} do not exist in a model with {total} language-model layers; "
                    "the adapter was trained for a different model"
                )
            return tuple(sorted(self.layers))
        if self.num_layers > total:
            raise ConfigError(
                f"num_layers={self.num_layers} exceeds the model's {total} language-model layers"
            )
        return tuple(range(total - self.num_layers, total))


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def language_layers(model: Any) -> tuple[str, nn.ModuleList]:
    """``(dotted path, layers)`` of the decoder layers of a Qwen2.5-VL / Qwen3-VL model."""
    for path in ("model.language_model.layers", "language_model.layers", "model.layers"):
        obj = model
        try:
            for part in path.split("."):
                obj = getattr(obj, part)
        except AttributeError:
            continue
        if isinstance(obj, nn.ModuleList):
            return path, obj
    raise ConfigError(
        f"{type(model).__name__} has no language-model decoder layers at model.language_model.layers; "
        "HGKV supports Qwen2.5-VL and Qwen3-VL (transformers >= 5)"
    )
