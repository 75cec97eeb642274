"""A base selector to fine-tune from: an exported ONNX scorer mapped back onto the torch module.

``train.init_from`` (:class:`~causalcache_lab.selector.train.TrainConfig`) names the base:
``bundled`` (the package's ``assets/selector/selector.onnx``), a model directory holding
``selector.onnx`` (what ``causalcache train selector`` / ``causalcache learn`` write) or an ``.onnx``
file. The graph is the export of :class:`~causalcache_lab.selector.model.SetScorerModel`, so each
initializer carries the name of a parameter (``event1.weight`` ``(H, F)``, ..., the ``feature_keep``
buffer ``(F,)``); :func:`load_base` copies them into a fresh module and refuses, naming both sides,

* a base built for another feature schema (``causalcache.schema_hash``) than this library extracts;
* another architecture (``hidden``/``embed`` widths from the initializers' shapes, ``drop_features``)
  than the training config asks for, or initializers that are not exactly the module's parameters;
* a Gemm that does not read its weight as ``(out, in)`` (``transB = 1``, as ``torch.onnx`` writes it);
* any difference between the loaded module's scores and onnxruntime's on random inputs (``atol 1e-4``).

A base that is an ensemble (``train.ensemble: E``, :class:`~causalcache_lab.selector.ensemble.EnsembleScorer`:
initializers ``members.<e>.<parameter>``) loads as one: the same checks apply to its members, the parity
check to their mean, and :meth:`BaseSelector.member_state` gives member ``e``'s weights, so an ensemble of
``E`` fine-tunes member by member (training refuses another ``train.ensemble`` than the base's ``E``).
A single base fine-tunes every member of any ensemble.

The base's ``target_scale`` (the training-set mean ``|y|`` its outputs are in units of) is kept, so the
fine-tuning loss and the "epoch 0" candidate read the outputs in the same units. The features need no
statistics: the scorer reads them raw; the OOD guard and the swap threshold are refitted on the new data.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from causalcache_lab.selector.ensemble import EnsembleScorer, Scorer
from causalcache_lab.selector.model import ScorerConfig, SetScorerModel, pack_sets
from causalcache_memory._optional import require
from causalcache_memory.errors import ConfigError, SchemaMismatchError
from causalcache_memory.selector.features import schema_hash
from causalcache_memory.selector.onnx_scorer import model_file

torch = require("torch", purpose="fine-tuning the learned selector")

__all__ = ["BaseSelector", "load_base", "resolve_base"]

#: largest score difference accepted between the loaded torch module and onnxruntime
PARITY_ATOL = 1e-4


@dataclass(frozen=True)
class BaseSelector:
    """A base scorer loaded for fine-tuning."""

    #: the ONNX file read
    path: Path
    #: sha256 of that file (provenance: ``metadata["init_from"]``)
    sha256: str
    #: ``{parameter or buffer name: tensor}`` for :meth:`SetScorerModel.load_state_dict`
    state_dict: dict[str, Any]
    #: the base's ``causalcache.target_scale``
    target_scale: float
    #: the base's architecture (widths read from its initializers; of each member for an ensemble)
    scorer: ScorerConfig
    #: number of scorers the base averages (1: a single scorer)
    members: int = 1

    def member_state(self, member: int) -> dict[str, Any]:
        """The state dict of member ``member`` (0-based) of an ensemble base; a single base's for any."""
        if self.members == 1:
            return self.state_dict
        prefix = f"members.{member}."
        return {n[len(prefix) :]: v for n, v in self.state_dict.items() if n.startswith(prefix)}

    def member_module(self, config: ScorerConfig, member: int = 0) -> SetScorerModel:
        """Member ``member`` as a scorer module, unchanged (what fine-tuning starts from), in eval mode."""
        model = SetScorerModel(config)
        model.load_state_dict(self.member_state(member))
        return model.eval()

    def provenance(self, spec: str) -> dict[str, Any]:
        """What the fine-tuned model's metadata records about its base."""
        return {
            "spec": spec,
            "path": str(self.path),
            "sha256": self.sha256,
            "target_scale": self.target_scale,
            "scorer": self.scorer.to_dict(),
            "members": self.members,
        }


def resolve_base(spec: str) -> Path:
    """``bundled`` | a model directory | an ``.onnx`` file -> the ONNX file (clear error when missing)."""
    if spec == "bundled":
        from causalcache_memory.selector.allocator import bundled_model_path

        return bundled_model_path()
    path = model_file(spec)
    if not path.is_file():
        raise ConfigError(
            f"train.init_from={spec!r}: {path} is not a selector model; give 'bundled', a model directory "
            "holding selector.onnx, an .onnx file, or null to train from scratch"
        )
    return path


def load_base(spec: str, scorer: ScorerConfig) -> BaseSelector:
    """Load ``spec`` (see :func:`resolve_base`) for a model of architecture ``scorer``; refusals above."""
    onnx = require("onnx", purpose="fine-tuning from an exported selector")
    from onnx import numpy_helper

    path = resolve_base(spec)
    proto = onnx.load(str(path))
    props = {p.key: p.value for p in proto.metadata_props}
    found = props.get("causalcache.schema_hash")
    if found != schema_hash():
        raise SchemaMismatchError(
            f"train.init_from={spec!r}: base {path} was trained on feature schema {found!r}, this library "
            f"extracts schema {schema_hash()!r}; fine-tune from a base of this version or set "
            "train.init_from: null"
        )
    weights = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    members = _member_count(weights)
    base_cfg = _base_config(weights, props, path, "members.0." if members > 1 else "")
    if (base_cfg.hidden, base_cfg.embed, base_cfg.drop_features) != (
        scorer.hidden,
        scorer.embed,
        tuple(scorer.drop_features),
    ):
        raise SchemaMismatchError(
            f"train.init_from={spec!r}: base {path} has architecture hidden={base_cfg.hidden}, "
            f"embed={base_cfg.embed}, drop_features={list(base_cfg.drop_features)} but the training config "
            f"asks for hidden={scorer.hidden}, embed={scorer.embed}, drop_features={list(scorer.drop_features)}; "
            "set train.hidden/embed/drop_features to the base's or train from scratch (train.init_from: null)"
        )
    _check_gemms(proto, path)
    model: Scorer = SetScorerModel(base_cfg)
    if members > 1:
        model = EnsembleScorer([SetScorerModel(base_cfg) for _ in range(members)])
    state = model.state_dict()
    for e in range(1, members):  # the exporter keeps one copy of the members' equal feature_keep buffers
        weights.setdefault(f"members.{e}.feature_keep", weights.get("members.0.feature_keep"))
    missing = sorted(n for n in state if weights.get(n) is None)
    extra = sorted(n for n in weights if "." in n and n not in state)  # named like a module parameter
    if missing or extra:
        raise SchemaMismatchError(
            f"train.init_from={spec!r}: base {path} lacks the scorer's parameters {missing} and has "
            f"parameters {extra} the scorer does not; it was not exported from SetScorerModel"
        )
    loaded = {n: torch.from_numpy(np.array(weights[n], dtype=np.float32)) for n in state}
    model.load_state_dict(loaded)
    _check_parity(model, path, spec)
    scale = float(props.get("causalcache.target_scale", "1.0"))
    sha = hashlib.sha256(path.read_bytes()).hexdigest()
    return BaseSelector(path, sha, loaded, scale, base_cfg, members)


def _member_count(weights: dict[str, np.ndarray]) -> int:
    """``E`` of an ensemble's initializers ``members.<e>.<parameter>``; 1 for a single scorer's."""
    found = [re.match(r"members\.(\d+)\.", name) for name in weights]
    return max((int(m.group(1)) + 1 for m in found if m), default=1)


def _base_config(
    weights: dict[str, np.ndarray], props: dict[str, str], path: Path, prefix: str = ""
) -> ScorerConfig:
    import json

    try:
        hidden, features = weights[prefix + "event1.weight"].shape
        embed = weights[prefix + "event2.weight"].shape[0]
        context = weights[prefix + "ctx_state.weight"].shape[1]
    except KeyError as exc:
        raise SchemaMismatchError(
            f"base selector {path} has no initializer {exc.args[0]!r}; it was not exported from SetScorerModel"
        ) from exc
    drop = tuple(json.loads(props.get("causalcache.drop_features", "[]")))
    return ScorerConfig(
        num_features=int(features),
        num_context=int(context),
        hidden=int(hidden),
        embed=int(embed),
        drop_features=drop,
    )


def _check_gemms(proto: Any, path: Path) -> None:
    """Every Gemm reads ``A (N, in)`` and a weight stored ``(out, in)``: ``transA = 0``, ``transB = 1``."""
    for node in proto.graph.node:
        if node.op_type != "Gemm":
            continue
        attrs = {a.name: a.i for a in node.attribute}
        if attrs.get("transA", 0) != 0 or attrs.get("transB", 0) != 1:
            raise SchemaMismatchError(
                f"base selector {path}: Gemm {node.name!r} on {list(node.input)} has transA="
                f"{attrs.get('transA', 0)}, transB={attrs.get('transB', 0)}; expected 0 and 1 "
                "(a torch.onnx export of SetScorerModel)"
            )


def _check_parity(model: Scorer, path: Path, spec: str, seed: int = 0) -> None:
    """The loaded module scores 9 random events under 4 random sets as onnxruntime does."""
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    rng = np.random.default_rng(seed)
    cfg = model.config
    events = rng.normal(size=(9, cfg.num_features)).astype(np.float32)
    context = rng.normal(size=(1, cfg.num_context)).astype(np.float32)
    sets = [(1, 3), (2, 4, 5, 9), (6,), (7, 8)]
    expected = OnnxScorer(path).score_sets(events, sets, context)
    rows, mask = pack_sets(sets)
    with torch.no_grad():
        got = model(
            torch.from_numpy(events), torch.tensor(rows), torch.tensor(mask), torch.from_numpy(context)
        ).numpy()
    diff = float(np.max(np.abs(got - expected)))
    if not diff <= PARITY_ATOL:
        raise SchemaMismatchError(
            f"train.init_from={spec!r}: the torch scorer loaded from {path} differs from its ONNX graph by "
            f"{diff:.3g} (> {PARITY_ATOL}); the graph is not SetScorerModel's, so it cannot be fine-tuned"
        )
