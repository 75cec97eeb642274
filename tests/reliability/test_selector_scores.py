"""Selector failure modes of the learned selector (H14's fixes of findings 9-10, exercised end to end).

NaN or infinite scores and a graph that does not match the scorer never produce a decision in the
selector's name: the step falls back to Recent-B with the reason in the decision log.
"""

from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

from reliability_agents import TypingPolicy  # noqa: E402
from reliability_helpers import screenshot  # noqa: E402

from causalcache_memory import Trace  # noqa: E402
from causalcache_memory.archive import LocalArchive  # noqa: E402
from causalcache_memory.controller import MemoryController  # noqa: E402
from causalcache_memory.errors import CausalCacheWarning, SchemaMismatchError  # noqa: E402
from causalcache_memory.selector.allocator import SelectorAllocator, bundled_model_path  # noqa: E402


class _Poisoned:
    """Wraps an onnxruntime session; writes ``value`` into one column of every score matrix."""

    def __init__(self, session, value: float) -> None:
        self._session, self.value = session, value

    def run(self, names, feeds):
        (out,) = self._session.run(names, feeds)
        out = np.array(out, copy=True)
        out[:, 0] = self.value
        return [out]

    def __getattr__(self, name):
        return getattr(self._session, name)


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_non_finite_scores_fall_back_with_the_reason(tmp_path, value):
    allocator = SelectorAllocator(min_gain=0.0, ood_guard=False)
    allocator.model.session = _Poisoned(allocator.model.session, value)
    with MemoryController(
        policy=TypingPolicy(),
        archive=LocalArchive(tmp_path),
        allocator=allocator,
        budget=1,
        selector_timeout_s=5.0,
    ) as ctl:
        trace = Trace("goal", episode_id="ep")
        ctl.observe(trace, screenshot(0))
        decisions = []
        with pytest.warns(CausalCacheWarning, match="NonFiniteScoreError"):
            for i in range(5):
                decisions.append(ctl.decide(trace))
                ctl.record(trace, decisions[-1], screenshot(i + 1))
    scored = [d for d in decisions if d.t > 2]  # t - 1 > B: the scorer runs
    assert scored and all("NonFiniteScoreError" in (d.fallback or "") for d in scored)
    assert all(d.allocation.allocator == "recent" for d in scored)  # never logged as the selector's choice
    allocator.close()


def test_graph_with_right_metadata_but_other_inputs_is_refused(tmp_path):
    model = onnx.load(str(bundled_model_path()))
    renamed = {"events": "events_v2"}
    for node in model.graph.node:
        node.input[:] = [renamed.get(x, x) for x in node.input]
    for graph_input in model.graph.input:
        if graph_input.name in renamed:
            graph_input.name = renamed[graph_input.name]
    path = tmp_path / "selector.onnx"
    onnx.save(model, str(path))
    with pytest.raises(SchemaMismatchError, match="graph does not match"):
        SelectorAllocator(model_path=path)
    shutil.copy(bundled_model_path(), tmp_path / "ok.onnx")
    SelectorAllocator(model_path=tmp_path / "ok.onnx").close()
