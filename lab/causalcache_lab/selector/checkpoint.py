"""Selector model directories: ``model.pt`` (weights only), ``metadata.json``, ``selector.onnx``; a torch scorer.

:func:`save_model` writes what :func:`~causalcache_lab.selector.train.train_selector` produced,
:func:`load_model` reads it back without pickle (``torch.load(weights_only=True)``) and refuses a model
built for another feature schema; :class:`TorchSetScorer` drives the beam with the torch model (evaluation
without ONNX); :func:`frozen_copy` a scorer that no optimizer moves (a fine-tune's anchor).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from causalcache_lab.selector.ensemble import EnsembleScorer, Scorer
from causalcache_lab.selector.model import ScorerConfig, SetScorerModel, pack_sets
from causalcache_memory._optional import require
from causalcache_memory.errors import SchemaMismatchError
from causalcache_memory.selector.features import schema_hash

torch = require("torch", purpose="training the learned selector")

__all__ = ["TorchSetScorer", "frozen_copy", "load_model", "save_model"]


def frozen_copy(model: Scorer, state: Mapping[str, Any] | None = None) -> Scorer:
    """A copy of ``model`` (with ``state`` loaded when given) in eval mode, its parameters without gradients."""
    frozen = copy.deepcopy(model)
    if state is not None:
        frozen.load_state_dict(state)
    for p in frozen.parameters():
        p.requires_grad_(False)
    return frozen.eval()


def save_model(
    model: Scorer, metadata: Mapping[str, Any], output_dir: Path, *, export_onnx: bool = True
) -> None:
    """Write ``model.pt`` (state dict), ``metadata.json`` and (optionally) ``selector.onnx``."""
    output_dir.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), output_dir / "model.pt")
    (output_dir / "metadata.json").write_text(json.dumps(metadata, indent=1, sort_keys=True))
    if export_onnx:
        from causalcache_lab.selector.export import export_onnx as _export

        _export(model, output_dir / "selector.onnx", metadata=metadata)


def load_model(model_dir: str | Path) -> tuple[Scorer, dict[str, Any]]:
    """Load ``model.pt`` + ``metadata.json`` written by :func:`save_model` (weights only, no pickle).

    An ensemble (``metadata["ensemble"]["members"] > 1``) loads as the :class:`EnsembleScorer` it was.
    """
    path = Path(model_dir)
    metadata = json.loads((path / "metadata.json").read_text())
    if metadata.get("schema_hash") != schema_hash():
        raise SchemaMismatchError(
            f"selector model {path} was trained on feature schema {metadata.get('schema_hash')!r} but this "
            f"library extracts schema {schema_hash()!r}; retrain the selector with this version"
        )
    scorer = dict(metadata["scorer"])
    scorer["drop_features"] = tuple(scorer.get("drop_features", ()))
    members = int(metadata.get("ensemble", {}).get("members", 1))
    config = ScorerConfig(**scorer)
    model: Scorer = SetScorerModel(config)
    if members > 1:
        model = EnsembleScorer([SetScorerModel(config) for _ in range(members)])
    model.load_state_dict(torch.load(path / "model.pt", weights_only=True))
    model.eval()
    return model, metadata


class TorchSetScorer:
    """Beam scorer over a torch model: ``(conds) -> (K, N)`` numpy (for evaluation without ONNX)."""

    def __init__(self, model: Scorer, events: np.ndarray, context: np.ndarray, *, sign: float = 1.0) -> None:
        self.model, self.sign = model, sign
        self.events = torch.from_numpy(np.ascontiguousarray(events, dtype=np.float32))
        self.context = torch.from_numpy(np.ascontiguousarray(context, dtype=np.float32))

    def __call__(self, conds: Sequence[tuple[int, ...]]) -> np.ndarray:
        rows, mask = pack_sets(conds)
        with torch.no_grad():
            out = self.model(
                self.events, torch.tensor(rows), torch.tensor(mask, dtype=torch.float32), self.context
            )
        return self.sign * out.numpy()
