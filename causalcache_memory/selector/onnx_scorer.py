"""onnxruntime inference of an exported set scorer (no torch import).

:class:`OnnxSelector` loads one ``.onnx`` file (or a model directory holding ``selector.onnx``), checks
its feature-schema hash against this library's extractor and refuses a mismatch with
:class:`~causalcache_memory.errors.SchemaMismatchError`, then scores conditioning sets for the beam.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from causalcache_memory._optional import require
from causalcache_memory.errors import SchemaMismatchError, SelectorError
from causalcache_memory.selector.features import schema_hash

__all__ = ["OnnxSelector", "pack_sets_np"]


def pack_sets_np(sets: Sequence[Sequence[int]]) -> tuple[np.ndarray, np.ndarray]:
    """1-based sets -> 0-based padded rows ``(K, M)`` int64 and member mask ``(K, M)`` float32."""
    m = max([len(s) for s in sets] + [1])
    rows = np.zeros((len(sets), m), dtype=np.int64)
    mask = np.zeros((len(sets), m), dtype=np.float32)
    for k, s in enumerate(sets):
        if s:
            rows[k, : len(s)] = np.fromiter(s, dtype=np.int64, count=len(s)) - 1
            mask[k, : len(s)] = 1.0
    return rows, mask


class OnnxSelector:
    """An exported scorer run with onnxruntime.

    Args:
        path: a ``.onnx`` file or a directory containing ``selector.onnx``.
        threads: intra-op threads (1 by default: the selector is latency-bound and small).

    Attributes:
        metadata: the model's ``metadata_props`` (feature names, schema hash, versions, training data).
    """

    def __init__(self, path: str | Path, *, threads: int = 1) -> None:
        ort = require("onnxruntime", purpose="running the learned selector")
        p = Path(path)
        if p.is_dir():
            p = p / "selector.onnx"
        if not p.is_file():
            raise SelectorError(
                f"selector model {p} does not exist; train one with `causalcache train selector`"
            )
        self.path = p
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(str(p), options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime raises its own untyped errors
            raise SelectorError(f"cannot load selector model {p}: {exc}") from exc
        self.metadata: dict[str, str] = dict(self.session.get_modelmeta().custom_metadata_map)
        found = self.metadata.get("causalcache.schema_hash")
        if found != schema_hash():
            raise SchemaMismatchError(
                f"selector model {p} was built for feature schema {found!r}, but this library's feature "
                f"extractor has schema {schema_hash()!r}; retrain (`causalcache train selector`) and re-export "
                "the model with this version of causalcache-memory"
            )
        self.feature_names: list[str] = json.loads(self.metadata.get("causalcache.feature_names", "[]"))
        self.drop_features: list[str] = json.loads(self.metadata.get("causalcache.drop_features", "[]"))

    def score_sets(
        self, events: np.ndarray, sets: Sequence[Sequence[int]], context: np.ndarray
    ) -> np.ndarray:
        """``Δ̂(j | S_k)`` as ``(K, N)`` for events ``(N, F)``, 1-based ``sets`` and context ``(1, C)``."""
        rows, mask = pack_sets_np(sets)
        (out,) = self.session.run(
            None, {"events": events, "sets": rows, "set_mask": mask, "context": context}
        )
        return out

    def scorer(self, events: np.ndarray, context: np.ndarray, *, sign: float = 1.0):  # type: ignore[no-untyped-def]
        """A beam :data:`~causalcache_memory.selector.beam.SetScorer` bound to one decision's features."""
        events = np.ascontiguousarray(events, dtype=np.float32)
        context = np.ascontiguousarray(context, dtype=np.float32)

        def score(conds: Sequence[tuple[int, ...]]) -> np.ndarray:
            out = self.score_sets(events, conds, context)
            return -out if sign < 0 else out

        return score
