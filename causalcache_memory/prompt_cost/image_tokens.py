"""How many prompt tokens one screenshot costs, per model family (rules are config, never constants).

Three rules, each a pydantic model selected by ``kind``:

* :class:`PatchImageRule` (``kind: patch``): Qwen2.5-VL / Qwen3-VL. The image is resized to ``(h', w')``,
  both multiples of ``f = patch_size * merge_size`` (28 for Qwen2.5-VL, 32 for Qwen3-VL)::

      h' = round(h / f) * f,  w' = round(w / f) * f                (Python's round: half to even)
      if h' * w' > max_pixels:  s = sqrt(h * w / max_pixels)
                                h' = max(f, floor(h / s / f) * f), w' = max(f, floor(w / s / f) * f)
      elif h' * w' < min_pixels: s = sqrt(min_pixels / (h * w))
                                h' = ceil(h * s / f) * f,          w' = ceil(w * s / f) * f
      tokens = (h' / f) * (w' / f)  (+ ``frame_tokens``: 2 for <|vision_start|> ... <|vision_end|>,
                                      counted with the text by the prompt accounting, so 0 here)

  :meth:`PatchImageRule.from_processor_config` reads ``patch_size``, ``merge_size`` and
  ``min_pixels``/``max_pixels`` (or ``size.shortest_edge``/``size.longest_edge``) from a model's
  ``preprocessor_config.json`` dictionary.
* :class:`AreaImageRule` (``kind: area``): scale down to fit ``max_long_edge`` and ``max_pixels``, then
  ``ceil(w * h / pixels_per_token)`` (Anthropic's published rule, ``pixels_per_token = 750``).
* :class:`TileImageRule` (``kind: tile``): fit into ``max_edge``, scale the short side down to
  ``short_edge``, then ``base_tokens + tile_tokens * ceil(w / tile) * ceil(h / tile)`` (OpenAI's
  published high-detail rule).

The hosted models' values live in ``assets/prompt_cost/hosted_models.yaml`` (:func:`hosted_image_rules`);
they are the providers' *published* rules, which a provider may change: check them against the token
counts your account reports.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from causalcache_memory.errors import ConfigError

__all__ = [
    "AreaImageRule",
    "ImageRule",
    "PatchImageRule",
    "TileImageRule",
    "hosted_image_rule",
    "hosted_image_rules",
    "hosted_table",
]


class _Rule(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _check_size(width: int, height: int) -> None:
    if width < 1 or height < 1:
        raise ConfigError(f"image size {width}x{height} must be at least 1x1 pixels; pass (width, height)")


class PatchImageRule(_Rule):
    """Qwen-VL image tokens: ``(h' / f) * (w' / f)`` with ``f = patch_size * merge_size`` (module docstring)."""

    kind: Literal["patch"] = "patch"
    patch_size: int = Field(14, ge=1)
    merge_size: int = Field(2, ge=1)
    min_pixels: int = Field(56 * 56, ge=1)
    max_pixels: int = Field(14 * 14 * 4 * 1280, ge=1)
    frame_tokens: int = Field(0, ge=0)

    @classmethod
    def from_processor_config(cls, config: Mapping[str, Any]) -> PatchImageRule:
        """From a ``preprocessor_config.json`` dictionary (``min_pixels``/``max_pixels`` or ``size``)."""
        size = config.get("size") or {}
        low = config.get("min_pixels", size.get("shortest_edge"))
        high = config.get("max_pixels", size.get("longest_edge"))
        if low is None or high is None:
            raise ConfigError(
                "the processor config has neither min_pixels/max_pixels nor size.shortest_edge/longest_edge; "
                "pass the preprocessor_config.json of a Qwen2.5-VL or Qwen3-VL model"
            )
        return cls(
            patch_size=int(config.get("patch_size", 14)),
            merge_size=int(config.get("merge_size", 2)),
            min_pixels=int(low),
            max_pixels=int(high),
        )

    def resized(self, width: int, height: int) -> tuple[int, int]:
        """``(width', height')`` the processor resizes a ``width x height`` image to."""
        _check_size(width, height)
        if max(width, height) / min(width, height) > 200:
            raise ConfigError(f"image size {width}x{height}: Qwen-VL refuses aspect ratios above 200")
        f = self.patch_size * self.merge_size
        h, w = round(height / f) * f, round(width / f) * f
        if h * w > self.max_pixels:
            s = math.sqrt(height * width / self.max_pixels)
            h, w = max(f, math.floor(height / s / f) * f), max(f, math.floor(width / s / f) * f)
        elif h * w < self.min_pixels:
            s = math.sqrt(self.min_pixels / (height * width))
            h, w = math.ceil(height * s / f) * f, math.ceil(width * s / f) * f
        return w, h

    def tokens(self, width: int, height: int) -> int:
        """Image tokens of a ``width x height`` screenshot."""
        w, h = self.resized(width, height)
        f = self.patch_size * self.merge_size
        return (w // f) * (h // f) + self.frame_tokens


class AreaImageRule(_Rule):
    """``ceil(w' * h' / pixels_per_token)`` after fitting ``max_long_edge`` and ``max_pixels``."""

    kind: Literal["area"] = "area"
    pixels_per_token: float = Field(750.0, gt=0)
    max_long_edge: int = Field(1568, ge=1)
    max_pixels: int = Field(1_150_000, ge=1)
    frame_tokens: int = Field(0, ge=0)

    def tokens(self, width: int, height: int) -> int:
        _check_size(width, height)
        scale = min(
            1.0, self.max_long_edge / max(width, height), math.sqrt(self.max_pixels / (width * height))
        )
        w, h = max(1, math.floor(width * scale)), max(1, math.floor(height * scale))
        return math.ceil(w * h / self.pixels_per_token) + self.frame_tokens


class TileImageRule(_Rule):
    """``base_tokens + tile_tokens * tiles`` after fitting ``max_edge`` and scaling the short side."""

    kind: Literal["tile"] = "tile"
    base_tokens: int = Field(85, ge=0)
    tile_tokens: int = Field(170, ge=0)
    tile: int = Field(512, ge=1)
    max_edge: int = Field(2048, ge=1)
    short_edge: int = Field(768, ge=1)

    def tokens(self, width: int, height: int) -> int:
        _check_size(width, height)
        scale = min(1.0, self.max_edge / max(width, height))
        w, h = width * scale, height * scale
        scale = min(1.0, self.short_edge / min(w, h))
        w, h = math.floor(w * scale), math.floor(h * scale)
        return self.base_tokens + self.tile_tokens * math.ceil(w / self.tile) * math.ceil(h / self.tile)


ImageRule = Annotated[PatchImageRule | AreaImageRule | TileImageRule, Field(discriminator="kind")]
_RULE = TypeAdapter(ImageRule)


@cache
def hosted_table() -> dict[str, dict[str, Any]]:
    """``assets/prompt_cost/hosted_models.yaml``'s ``models``: ``{name: {"image": ..., "cache": ...}}``."""
    import yaml

    text = resources.files("causalcache_memory").joinpath("assets/prompt_cost/hosted_models.yaml").read_text()
    return dict((yaml.safe_load(text) or {}).get("models") or {})


@cache
def hosted_image_rules() -> dict[str, PatchImageRule | AreaImageRule | TileImageRule]:
    """The documented table of hosted models' image rules (``assets/prompt_cost/hosted_models.yaml``)."""
    try:
        return {name: _RULE.validate_python(entry["image"]) for name, entry in hosted_table().items()}
    except (KeyError, TypeError, ValidationError) as exc:  # pragma: no cover - the bundled file is tested
        raise ConfigError(f"assets/prompt_cost/hosted_models.yaml is malformed: {exc}") from exc


def hosted_image_rule(model: str) -> PatchImageRule | AreaImageRule | TileImageRule:
    """The image rule of one hosted model of the table, by name."""
    table = hosted_image_rules()
    if model not in table:
        raise ConfigError(
            f"model={model!r} is not in the hosted-model table; use one of {', '.join(sorted(table))} "
            "or build a PatchImageRule/AreaImageRule/TileImageRule yourself"
        )
    return table[model]
