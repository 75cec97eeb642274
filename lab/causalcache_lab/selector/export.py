"""ONNX export of the set scorer: one self-contained file with a dynamic event count and set count.

The graph's inputs and output are those of :class:`~causalcache_lab.selector.model.SetScorerModel`
(``events (N, F)``, ``sets (K, M)``, ``set_mask (K, M)``, ``context (1, C)`` -> ``scores (K, N)``) with
``N``, ``K`` and ``M`` dynamic. ``metadata_props`` carry the feature schema (names, hash), the library and
model-format versions, the target scale and a description of the training data, so a deployment can
refuse a model whose features it would compute differently; and the swap threshold calibrated
on dev with its rule (``causalcache.calibration``), the out-of-distribution guard's statistics
(``causalcache.ood``) and whether the model uses thumbnail features (``causalcache.image_features``).
Format 3: the calibration also holds the dev pass-2 frontier and the budget it was chosen for (a
deployment re-chooses the threshold for its own ``second_pass_share``), and the guard is the robust
shrinkage guard with a dev false-alarm rate (:mod:`causalcache_memory.selector.ood`).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from causalcache_memory._optional import require
from causalcache_memory.selector.features import CONTEXT_SCHEMA, FEATURE_SCHEMA, schema_hash
from causalcache_memory.selector.onnx_scorer import MODEL_FORMAT_VERSION  # the layout the library reads

__all__ = ["METADATA_KEYS", "MODEL_FORMAT_VERSION", "export_onnx"]


METADATA_KEYS = (
    "causalcache.schema_hash",
    "causalcache.feature_names",
    "causalcache.context_names",
    "causalcache.library_version",
    "causalcache.model_format_version",
    "causalcache.training_data",
    "causalcache.target_scale",
    "causalcache.drop_features",
    "causalcache.calibration",
    "causalcache.ood",
    "causalcache.image_features",
)


def export_onnx(model: Any, path: str | Path, *, metadata: Mapping[str, Any] | None = None) -> Path:
    """Export ``model`` to ``path`` (single file, ``external_data=False``) and stamp its metadata."""
    torch = require("torch", purpose="exporting the selector to ONNX")
    onnx = require("onnx", purpose="exporting the selector to ONNX")
    from causalcache_memory import __version__

    meta = dict(metadata or {})
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n, k, m = 7, 3, 2
    cfg = model.config
    args = (
        torch.randn(n, cfg.num_features),
        torch.zeros(k, m, dtype=torch.int64),
        torch.ones(k, m),
        torch.randn(1, cfg.num_context),
    )
    dims = {
        "events": {0: torch.export.Dim("n_events", min=2)},
        "sets": {0: torch.export.Dim("n_sets"), 1: torch.export.Dim("set_size")},
    }
    dims["set_mask"] = dims["sets"]
    dims["context"] = None
    model.eval()
    with warnings.catch_warnings():  # exporter internals warn about deprecated pytree/axis naming
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            model,
            args,
            dynamic_shapes=dims,
            input_names=["events", "sets", "set_mask", "context"],
            output_names=["scores"],
            dynamo=True,
            external_data=False,
            verbose=False,
        )
        program.save(str(path), external_data=False)
    proto = onnx.load(str(path))
    props = {
        "causalcache.schema_hash": schema_hash(),
        "causalcache.feature_names": json.dumps([n for n, _ in FEATURE_SCHEMA]),
        "causalcache.context_names": json.dumps([n for n, _ in CONTEXT_SCHEMA]),
        "causalcache.library_version": __version__,
        "causalcache.model_format_version": str(MODEL_FORMAT_VERSION),
        "causalcache.training_data": json.dumps(
            {
                "description": meta.get("data_description", ""),
                "labels": meta.get("labels", {}),
                "states": meta.get("states", {}),
            },
            sort_keys=True,
        ),
        "causalcache.target_scale": str(meta.get("target_scale", 1.0)),
        "causalcache.drop_features": json.dumps(list(cfg.drop_features)),
        "causalcache.image_features": "true" if meta.get("image_features", True) else "false",
    }
    if "calibration" in meta:
        props["causalcache.calibration"] = json.dumps(meta["calibration"], sort_keys=True)
    if meta.get("ood", {}).get("guard"):  # absent when training had too few states for a guard
        props["causalcache.ood"] = meta["ood"]["guard"]
    del proto.metadata_props[:]
    for key, value in props.items():
        entry = proto.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(proto, str(path))
    return path
