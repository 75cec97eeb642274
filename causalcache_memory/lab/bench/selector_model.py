"""Which selector model the benchmarks run: the bundled one, or a throwaway scorer of the same shape.

The latency of the learned selector depends on the scorer's architecture and on how many beam steps
its weights make the search take, not on what it learned. When this installation bundles no trained
model, :func:`benchmark_selector_model` writes a *throwaway* ONNX graph with the same two-tower
structure, sizes and inputs as :class:`~causalcache_memory.lab.selector.model.SetScorerModel` (random
weights, built with ``onnx.helper`` in milliseconds: no torch, no export) and stamps the feature-schema
metadata the loader checks. Results produced with it say so (``selector_model`` in the JSON).

Graph (``N`` events, ``K`` sets, ``M`` members, hidden ``H``, embedding ``D``)::

    h    = relu(relu(events W1 + b1) W2 + b2)                  (N, D)
    emb  = h We + be ;  bias = h wb + bb                       (N, D), (N, 1)
    mean = sum_m(h[sets] * mask) / max(count, 1)              (K, D)
    mx   = max_m(h[sets] + (mask - 1) 1e4) * (count > 0)       (K, D)
    q    = relu(mean Wm + bm + mx Wx + context Wc) Wo + bo     (K, D)
    out  = q emb^T + bias^T                                    (K, N)
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np

from causalcache_memory._optional import require

__all__ = ["benchmark_selector_model", "write_throwaway_selector"]


def write_throwaway_selector(path: str | Path, *, hidden: int = 64, embed: int = 32, seed: int = 0) -> Path:
    """Write a random-weight set scorer with the library's feature schema to ``path``."""
    onnx = require("onnx", purpose="building the benchmark's throwaway selector model")
    from onnx import TensorProto, helper, numpy_helper

    from causalcache_memory.selector.features import (
        CONTEXT_SCHEMA,
        FEATURE_SCHEMA,
        NUM_CONTEXT,
        NUM_FEATURES,
        schema_hash,
    )

    rng = np.random.default_rng(seed)
    weights: dict[str, np.ndarray] = {}

    def lin(name: str, n_in: int, n_out: int, bias: bool = True) -> None:
        weights[f"{name}_w"] = (rng.standard_normal((n_in, n_out)) / np.sqrt(n_in)).astype(np.float32)
        if bias:
            weights[f"{name}_b"] = (0.01 * rng.standard_normal(n_out)).astype(np.float32)

    lin("e1", NUM_FEATURES, hidden)
    lin("e2", hidden, embed)
    lin("emb", embed, embed)
    lin("bias", embed, 1)
    lin("cmean", embed, hidden)
    lin("cmax", embed, hidden, bias=False)
    lin("cstate", NUM_CONTEXT, hidden, bias=False)
    lin("cout", hidden, embed)
    consts = {
        "one": np.array(1.0, np.float32),
        "zero": np.array(0.0, np.float32),
        "big": np.array(1e4, np.float32),
        "axis1": np.array([1], np.int64),
        "axis_last": np.array([-1], np.int64),
    }
    node = helper.make_node
    nodes = [
        node("MatMul", ["events", "e1_w"], ["e1_m"]),
        node("Add", ["e1_m", "e1_b"], ["e1_a"]),
        node("Relu", ["e1_a"], ["h1"]),
        node("MatMul", ["h1", "e2_w"], ["e2_m"]),
        node("Add", ["e2_m", "e2_b"], ["e2_a"]),
        node("Relu", ["e2_a"], ["h"]),
        node("MatMul", ["h", "emb_w"], ["emb_m"]),
        node("Add", ["emb_m", "emb_b"], ["emb"]),
        node("MatMul", ["h", "bias_w"], ["bias_m"]),
        node("Add", ["bias_m", "bias_b"], ["bias"]),
        node("Gather", ["h", "sets"], ["members"], axis=0),
        node("Unsqueeze", ["set_mask", "axis_last"], ["m"]),
        node("ReduceSum", ["m", "axis1"], ["count"], keepdims=0),
        node("Mul", ["members", "m"], ["masked"]),
        node("ReduceSum", ["masked", "axis1"], ["msum"], keepdims=0),
        node("Max", ["count", "one"], ["count1"]),
        node("Div", ["msum", "count1"], ["mean"]),
        node("Sub", ["m", "one"], ["m1"]),
        node("Mul", ["m1", "big"], ["pen"]),
        node("Add", ["members", "pen"], ["mp"]),
        node("ReduceMax", ["mp", "axis1"], ["mxr"], keepdims=0),
        node("Greater", ["count", "zero"], ["has"]),
        node("Cast", ["has"], ["hasf"], to=TensorProto.FLOAT),
        node("Mul", ["mxr", "hasf"], ["mx"]),
        node("MatMul", ["mean", "cmean_w"], ["qa"]),
        node("Add", ["qa", "cmean_b"], ["qb"]),
        node("MatMul", ["mx", "cmax_w"], ["qc"]),
        node("MatMul", ["context", "cstate_w"], ["qd"]),
        node("Add", ["qb", "qc"], ["qe"]),
        node("Add", ["qe", "qd"], ["qf"]),
        node("Relu", ["qf"], ["qg"]),
        node("MatMul", ["qg", "cout_w"], ["qh"]),
        node("Add", ["qh", "cout_b"], ["q"]),
        node("Transpose", ["emb"], ["embT"], perm=[1, 0]),
        node("MatMul", ["q", "embT"], ["qe2"]),
        node("Transpose", ["bias"], ["biasT"], perm=[1, 0]),
        node("Add", ["qe2", "biasT"], ["scores"]),
    ]
    inputs = [
        helper.make_tensor_value_info("events", TensorProto.FLOAT, ["n_events", NUM_FEATURES]),
        helper.make_tensor_value_info("sets", TensorProto.INT64, ["n_sets", "set_size"]),
        helper.make_tensor_value_info("set_mask", TensorProto.FLOAT, ["n_sets", "set_size"]),
        helper.make_tensor_value_info("context", TensorProto.FLOAT, [1, NUM_CONTEXT]),
    ]
    output = helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["n_sets", "n_events"])
    inits = [numpy_helper.from_array(v, k) for k, v in {**weights, **consts}.items()]
    graph = helper.make_graph(nodes, "throwaway_set_scorer", inputs, [output], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    model.ir_version = 9
    meta = {
        "causalcache.schema_hash": schema_hash(),
        "causalcache.feature_names": json.dumps([n for n, _ in FEATURE_SCHEMA]),
        "causalcache.context_names": json.dumps([n for n, _ in CONTEXT_SCHEMA]),
        "causalcache.training_data": json.dumps({"description": "none: random weights for benchmarks"}),
        "causalcache.drop_features": "[]",
    }
    for key, value in meta.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.checker.check_model(model)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def benchmark_selector_model(workdir: str | Path | None = None) -> tuple[Path, str]:
    """``(path, provenance)``: the bundled model if shipped, else a throwaway one written under ``workdir``.

    ``provenance`` is ``"bundled"`` or ``"throwaway (random weights, same architecture)"``.
    """
    from causalcache_memory.errors import SelectorError
    from causalcache_memory.selector.allocator import bundled_model_path

    try:
        return bundled_model_path(), "bundled"
    except SelectorError:
        pass
    folder = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="causalcache-bench-"))
    path = write_throwaway_selector(folder / "selector.onnx")
    return path, "throwaway (random weights, same architecture)"
