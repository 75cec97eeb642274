"""onnxruntime inference of an exported set scorer (no torch import).

:class:`OnnxScorer` loads one ``.onnx`` file (or a model directory holding ``selector.onnx``), checks
its feature-schema hash against this library's extractor *and* the graph's actual inputs and output
(names, ranks, element types, fixed widths) and refuses a mismatch with
:class:`~causalcache_memory.errors.SchemaMismatchError`, then scores conditioning sets for the beam.
Scores that are not finite (NaN, ±inf) are refused with :class:`NonFiniteScoreError` instead of being
ranked. The model's calibration (stored threshold and the dev pass-2 frontier) and OOD statistics are
read from its metadata (``causalcache.calibration``, ``causalcache.ood``). Only models of
:data:`MODEL_FORMAT_VERSION` load: an older format (format 2: a threshold without frontier and a
Mahalanobis guard) is refused with :class:`~causalcache_memory.errors.SchemaMismatchError` naming the format
and the fix (retrain and re-export).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from causalcache_memory._optional import require
from causalcache_memory.errors import SchemaMismatchError, SelectorError
from causalcache_memory.selector.features import NUM_CONTEXT, NUM_FEATURES, feature_index, schema_hash
from causalcache_memory.selector.ood import RobustGuard, load_guard
from causalcache_memory.selector.ood_masks import group_columns

__all__ = [
    "GRAPH_INPUTS",
    "GRAPH_OUTPUTS",
    "MODEL_FILE",
    "MODEL_FORMAT_VERSION",
    "NonFiniteScoreError",
    "OnnxScorer",
    "model_file",
    "pack_sets_np",
]

#: the exported model's metadata layout this library reads (``causalcache.model_format_version``; 3: the
#: pass-2 frontier and the robust OOD guard); the lab's export writes it
MODEL_FORMAT_VERSION = 3

#: ``name -> (element type, rank, {axis: fixed width})`` the scorer graph must declare
GRAPH_INPUTS: dict[str, tuple[str, int, dict[int, int]]] = {
    "events": ("tensor(float)", 2, {1: NUM_FEATURES}),
    "sets": ("tensor(int64)", 2, {}),
    "set_mask": ("tensor(float)", 2, {}),
    "context": ("tensor(float)", 2, {1: NUM_CONTEXT}),
}
GRAPH_OUTPUTS: dict[str, tuple[str, int, dict[int, int]]] = {"scores": ("tensor(float)", 2, {})}


class NonFiniteScoreError(SelectorError, ValueError):
    """The scorer returned NaN or infinite scores; the decision must not rank them (falls back)."""


def _graph_mismatches(
    args: Sequence, expected: dict[str, tuple[str, int, dict[int, int]]], what: str
) -> list[str]:
    """Differences between a session's declared inputs/outputs and ``expected`` (empty when they match)."""
    found = {a.name: a for a in args}
    problems = []
    if set(found) != set(expected):
        problems.append(f"{what} are {sorted(found)}, expected {sorted(expected)}")
    for name, (dtype, rank, fixed) in expected.items():
        arg = found.get(name)
        if arg is None:
            continue
        shape = list(arg.shape or [])
        if arg.type != dtype:
            problems.append(f"{what[:-1]} {name!r} has element type {arg.type}, expected {dtype}")
        if len(shape) != rank:
            problems.append(f"{what[:-1]} {name!r} has rank {len(shape)} {shape}, expected rank {rank}")
            continue
        for axis, width in fixed.items():
            if isinstance(shape[axis], int) and shape[axis] != width:
                problems.append(
                    f"{what[:-1]} {name!r} has width {shape[axis]} on axis {axis}, expected {width}"
                )
    return problems


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


#: the file name of an exported scorer inside its model directory
MODEL_FILE = "selector.onnx"


def model_file(path: str | Path) -> Path:
    """The ONNX file of ``path``: the path itself, or ``selector.onnx`` inside a model directory."""
    p = Path(path)
    return p / MODEL_FILE if p.is_dir() else p


class OnnxScorer:
    """An exported scorer run with onnxruntime.

    Args:
        path: a ``.onnx`` file or a directory containing ``selector.onnx``.
        threads: intra-op threads (1 by default: the selector is latency-bound and small).

    Attributes:
        metadata: the model's ``metadata_props`` (feature names, schema hash, versions, training data).
    """

    def __init__(self, path: str | Path, *, threads: int = 1) -> None:
        ort = require("onnxruntime", purpose="running the learned selector")
        p = model_file(path)
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
        problems = _graph_mismatches(self.session.get_inputs(), GRAPH_INPUTS, "inputs")
        problems += _graph_mismatches(self.session.get_outputs(), GRAPH_OUTPUTS, "outputs")
        if problems:
            raise SchemaMismatchError(
                f"selector model {p} has the right schema metadata but its graph does not match the scorer "
                f"this library runs: {'; '.join(problems)}; re-export it with `causalcache train selector`"
            )
        #: the model's metadata layout version (``causalcache.model_format_version``; 0 when absent)
        self.format_version: int = int(self.metadata.get("causalcache.model_format_version", "0") or 0)
        if self.format_version != MODEL_FORMAT_VERSION:
            raise SchemaMismatchError(
                f"selector model {p} is of model format {self.format_version} "
                f"(causalcache.model_format_version), but this library reads format {MODEL_FORMAT_VERSION} "
                "only; retrain and re-export it (`causalcache train selector` or `causalcache learn`)"
            )
        self.feature_names: list[str] = json.loads(self.metadata.get("causalcache.feature_names", "[]"))
        self.drop_features: list[str] = json.loads(self.metadata.get("causalcache.drop_features", "[]"))
        self.drop_index: list[int] = [feature_index(n) for n in self.drop_features]
        #: ``{"min_gain", "rule", "frontier", "frontier_by_budget", ...}`` from the dev split at training time
        self.calibration: dict = json.loads(self.metadata.get("causalcache.calibration", "{}"))
        ood = self.metadata.get("causalcache.ood")
        #: the out-of-distribution guard (:mod:`~causalcache_memory.selector.ood`); None when not exported
        self.ood: RobustGuard | None = (
            load_guard(ood, self.feature_names, source=f"selector model {p}") if ood else None
        )
        #: whether the model was trained with thumbnail statistics (False: the extractor reads no pixels)
        self.image_features: bool = self.metadata.get("causalcache.image_features", "true") != "false"
        #: ``{group: feature indices}`` (availability first) of the maskable feature groups
        #: (:data:`~causalcache_memory.selector.ood_masks.MASK_GROUPS`) this model was trained with
        self.read_groups: dict[str, tuple[int, ...]] = self._read_groups()

    def _read_groups(self) -> dict[str, tuple[int, ...]]:
        """The groups the model reads: its guard's ``mask_groups`` (the groups whose columns varied in
        training, not dropped); for a model without that guard, every group of its feature names that is
        not dropped (image statistics only with ``image_features``)."""
        if isinstance(self.ood, RobustGuard):
            return dict(self.ood.mask_groups)
        dropped = set(self.drop_index)
        used = [
            i
            for i, name in enumerate(self.feature_names)
            if i not in dropped and (self.image_features or not name.startswith("image_"))
        ]
        return group_columns(self.feature_names, used) if used else {}

    @property
    def calibrated_min_gain(self) -> float | None:
        """The swap threshold stored at training (for the training budget); None when the model has none.

        ``min_gain: auto`` re-chooses from ``calibration["frontier"]`` for the deployment's share
        (:func:`~causalcache_memory.selector.threshold.resolve_min_gain`).
        """
        value = self.calibration.get("min_gain")
        return None if value is None else float(value)

    def score_sets(
        self, events: np.ndarray, sets: Sequence[Sequence[int]], context: np.ndarray
    ) -> np.ndarray:
        """``Δ̂(j | S_k)`` as ``(K, N)`` for events ``(N, F)``, 1-based ``sets`` and context ``(1, C)``."""
        rows, mask = pack_sets_np(sets)
        (out,) = self.session.run(
            None, {"events": events, "sets": rows, "set_mask": mask, "context": context}
        )
        if out.shape != (len(sets), len(events)):
            raise SchemaMismatchError(
                f"selector model {self.path} returned scores of shape {out.shape}, expected "
                f"{(len(sets), len(events))}; re-export it with `causalcache train selector`"
            )
        bad = ~np.isfinite(out)
        if bad.any():
            n_nan = int(np.isnan(out).sum())
            raise NonFiniteScoreError(
                f"selector model {self.path} returned {int(bad.sum())} non-finite scores ({n_nan} NaN, "
                f"{int(bad.sum()) - n_nan} infinite) of {out.size}; the decision falls back to Recent-B. "
                "Check the model (retrain or re-export it) and the features it was given"
            )
        return out

    def scorer(self, events: np.ndarray, context: np.ndarray, *, sign: float = 1.0):
        """A beam :data:`~causalcache_memory.selector.beam.SetScorer` bound to one decision's features."""
        events = np.ascontiguousarray(events, dtype=np.float32)
        context = np.ascontiguousarray(context, dtype=np.float32)

        def score(conds: Sequence[tuple[int, ...]]) -> np.ndarray:
            out = self.score_sets(events, conds, context)
            return -out if sign < 0 else out

        return score
