"""The ``causalcache train hgkv`` / ``causalcache eval did`` recipe (YAML, validated, all errors at once).

Example (``examples/hgkv_recipe.yaml``)::

    model: runs/hgkv/tiny-qwen          # local model directory
    tiny_model: {family: qwen2_5_vl}    # build a tiny offline model there if it is missing
    archive: runs/hgkv/archive
    data:
      synthetic: {trajectories: 40, seed: 0}   # or trajectories: [FILE.jsonl, ...]
      groups: runs/hgkv/groups.jsonl           # written when mined
      budgets: [1, 2, 4]
    arm: hgkv                           # or ungated
    train: {steps: 60, lr: 0.02, batch_size: 4, eval_every: 10, seed: 0}
    output_dir: runs/hgkv/hgkv
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = ["HGKVRecipe", "load_recipe"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TinyModelSpec(_Strict):
    """Build a tiny random-weight model at ``model`` when that directory has no ``config.json``."""

    family: Literal["qwen2_5_vl", "qwen3_vl"] = "qwen2_5_vl"
    num_layers: int = Field(8, ge=8)
    seed: int = 0


class SyntheticSpec(_Strict):
    """The colour-recall task of :mod:`causalcache_lab.hgkv.synthetic`."""

    trajectories: int = Field(40, ge=1)
    seed: int = 0
    colours: int = Field(8, ge=7, le=8)


class DataSpec(_Strict):
    trajectories: list[str] = Field(default_factory=list, description="trajectory JSONL files")
    synthetic: SyntheticSpec | None = None
    groups: str | None = Field(None, description="groups JSONL: read if it exists, else mined and written")
    budgets: list[int] = Field(default_factory=lambda: [1, 2, 4])
    held_out_budgets: list[int] = Field(
        default_factory=list, description="budgets mined but never trained on (the paper holds out B=8)"
    )
    radius: float | None = Field(
        None, ge=0, description="mining pointer tolerance (relative units); default per platform"
    )
    dev_fraction: float = Field(0.15, ge=0, lt=0.5)
    test_fraction: float = Field(0.15, ge=0, lt=0.5)
    split_salt: str = ""

    @model_validator(mode="after")
    def _one_source(self) -> DataSpec:
        if bool(self.trajectories) == (self.synthetic is not None):
            raise ValueError("give exactly one of data.trajectories (files) or data.synthetic")
        if any(b < 1 for b in self.budgets) or not self.budgets:
            raise ValueError(f"data.budgets={self.budgets} must be positive integers")
        return self


class TrainSpec(_Strict):
    steps: int = Field(200, ge=1)
    lr: float = Field(5e-3, gt=0)
    batch_size: int = Field(4, ge=1)
    eval_every: int = Field(25, ge=1)
    seed: int = 0
    bootstrap_reps: int = Field(1000, ge=100)
    margin: float = 0.01
    eps: float = 0.02
    lam_cap: float = 2.0
    lam: float = 1e-4


class RenderSpec(_Strict):
    system_prompt: str | None = None
    short_summaries: bool = Field(False, description="'<index>.' summaries (tiny-model smoke runs)")


class HGKVRecipe(_Strict):
    model: str
    tiny_model: TinyModelSpec | None = None
    archive: str
    data: DataSpec
    arm: Literal["hgkv", "ungated"] = "hgkv"
    rank: int = Field(8, ge=1)
    alpha: float = Field(16.0, gt=0)
    num_layers: int = Field(8, ge=1)
    train: TrainSpec = Field(default_factory=TrainSpec)
    render: RenderSpec = Field(default_factory=RenderSpec)
    output_dir: str
    device: str = "cpu"
    dtype: str | None = None


def load_recipe(path: str | Path) -> HGKVRecipe:
    """Load and validate an HGKV recipe (every problem reported at once)."""
    from causalcache_memory.config.loader import load_config

    return load_config(path, HGKVRecipe)
