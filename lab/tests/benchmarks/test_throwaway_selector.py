"""The benchmarks' throwaway selector is exported through the training export path and loads like a trained one."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")


def test_throwaway_selector_exports_loads_and_scores(tmp_path) -> None:
    from causalcache_lab.bench.selector_model import write_throwaway_selector
    from causalcache_memory.selector.features import NUM_CONTEXT, NUM_FEATURES
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    a = OnnxScorer(write_throwaway_selector(tmp_path / "a.onnx", seed=0))
    b = OnnxScorer(write_throwaway_selector(tmp_path / "b.onnx", seed=1))
    rng = np.random.default_rng(0)
    events = rng.standard_normal((6, NUM_FEATURES)).astype(np.float32)
    context = rng.standard_normal((1, NUM_CONTEXT)).astype(np.float32)
    sets = [(1, 2), (3,), (4, 5)]
    sa, sb = a.scorer(events, context)(sets), b.scorer(events, context)(sets)
    assert np.asarray(sa).shape == (3, 6) and np.isfinite(sa).all()
    assert not np.allclose(sa, sb)  # the seed reaches the weights: not a constant graph
