"""Selector failure modes of the reliability review (issue 17, findings 7, 9 and 10)."""

from __future__ import annotations

import contextlib
import hashlib
import io
import threading

import numpy as np
import pytest
from selector_synth import DictArchive, make_trajectories

from causalcache_memory import Action
from causalcache_memory.allocation import recent_b
from causalcache_memory.archive.base import StoredImage
from causalcache_memory.errors import CausalCacheWarning, SchemaMismatchError
from causalcache_memory.policy import Generation

pytest.importorskip("onnxruntime")


class _Fixed:
    name = "fixed"

    def generate(self, prompt):
        return Generation("click", Action("click", x=0.5, y=0.5))

    def score(self, prompts, targets):  # pragma: no cover - not used
        return [0.0] * len(prompts)


class _StallingArchive(DictArchive):
    """Pixels of any hash; ``open_image`` of a hash in ``stall`` blocks until ``release`` is set."""

    def __init__(self) -> None:
        self.stall: set[str] = set()
        self.release = threading.Event()
        self.entered = threading.Event()

    def put(self, data: bytes) -> StoredImage:
        return StoredImage(hashlib.sha256(data).hexdigest(), "PNG", 8, 8, len(data))

    def retain(self, episode: str, shas) -> None:
        pass

    def open_image(self, sha: str):
        from PIL import Image

        if sha in self.stall:
            self.entered.set()
            self.release.wait(30)
        buf = io.BytesIO()
        Image.new("RGB", (8, 8), (int(sha[:2], 16), 0, 0)).save(buf, format="PNG")
        return contextlib.closing(Image.open(io.BytesIO(buf.getvalue())))


def test_a_stalled_thumbnail_read_does_not_block_the_next_record(trained):
    """Finding 7: while a (timed-out) decision is stalled reading a thumbnail, the hook that the next
    ``observe``/``record`` calls (``prepare``) must not wait on the selector's lock."""
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.selector.allocator import SelectorAllocator

    _, out, _ = trained
    archive = _StallingArchive()
    selector = SelectorAllocator(out)
    traj = make_trajectories(1, length=10, seed=3)[0][0]
    trace = traj.trace_at(10)
    archive.stall = {trace.events[0].screenshot}  # the first event's thumbnail read hangs
    ctx = AllocationContext(trace, 2, archive, witness=traj.steps[9].action)
    stalled = threading.Thread(target=selector.allocate, args=(ctx,), daemon=True)
    try:
        stalled.start()
        assert archive.entered.wait(10)  # the decision is now inside feature extraction, stalled
        done = threading.Event()

        def next_screenshot() -> None:  # what the controller runs when the next screen is archived
            selector.prepare(archive, archive.put(b"next screen").sha256)
            done.set()

        worker = threading.Thread(target=next_screenshot, daemon=True)
        worker.start()
        worker.join(10)
        assert done.is_set(), "prepare() blocked behind the stalled selector step"
        assert stalled.is_alive()  # the stalled decision is still stalled: nothing was skipped
    finally:
        archive.release.set()
        stalled.join(10)
        selector.close()
    assert not stalled.is_alive()


def _patched_scores(selector, transform) -> None:
    real = selector.model.session

    class Session:
        def run(self, names, feeds):
            (out,) = real.run(names, feeds)
            return [transform(out.copy())]

    selector.model.session = Session()


@pytest.mark.parametrize("kind", ["nan", "inf_column"], ids=["NaN scores", "+inf in one event's column"])
def test_non_finite_scores_are_refused_with_a_named_reason(trained, kind):
    """Finding 9: NaN / +inf scores fall back to Recent-B and the decision log says why."""
    from causalcache_memory.controller import MemoryController
    from causalcache_memory.selector.allocator import SelectorAllocator

    _, out, _ = trained
    selector = SelectorAllocator(out, min_gain=0, ood_guard=False)

    def transform(scores: np.ndarray) -> np.ndarray:
        if kind == "nan":
            scores[:] = np.nan
        else:
            scores[:, 1] = np.inf  # event 2 would beat every recent slot
        return scores

    _patched_scores(selector, transform)
    ctl = MemoryController(
        policy=_Fixed(), archive=DictArchive(), allocator=selector, budget=2, selector_timeout_s=30.0
    )  # a loaded machine must not turn this into a time-out fallback
    traj = make_trajectories(1, length=12, seed=5)[0][0]
    for t in (9, 12):
        with pytest.warns(CausalCacheWarning, match="NonFiniteScoreError"):
            record = ctl.decide(traj.trace_at(t)).to_record()
        assert record["selected"] == list(recent_b(t, 2)) and record["second_pass"] is False
        assert "NonFiniteScoreError" in record["fallback"] and "non-finite" in record["fallback"]
    ctl.close()


def _graph(onnx, helper, inputs, metadata) -> bytes:
    """A loadable graph with the given inputs; output ``scores`` is an Identity of ``set_mask``."""
    out = helper.make_tensor_value_info("scores", onnx.TensorProto.FLOAT, ["n_sets", "n_events"])
    node = helper.make_node("Identity", [inputs[2].name], ["scores"])
    model = helper.make_model(
        helper.make_graph([node], "g", inputs, [out]), opset_imports=[helper.make_opsetid("", 17)]
    )
    model.ir_version = 8
    for key, value in metadata.items():
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    return model.SerializeToString()


@pytest.mark.parametrize("variant", ["renamed_input", "wrong_dtype", "wrong_rank", "wrong_width"], ids=str)
def test_graph_inputs_are_checked_not_only_metadata(trained, tmp_path, variant):
    """Finding 10: right metadata, different graph inputs -> refused at load, not a fallback per step."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from causalcache_memory.selector.features import NUM_CONTEXT, NUM_FEATURES
    from causalcache_memory.selector.onnx_scorer import OnnxScorer

    _, out, _ = trained
    meta = {p.key: p.value for p in onnx.load(str(out / "selector.onnx")).metadata_props}
    spec = {
        "events": (TensorProto.FLOAT, ["n_events", NUM_FEATURES]),
        "sets": (TensorProto.INT64, ["n_sets", "set_size"]),
        "set_mask": (TensorProto.FLOAT, ["n_sets", "set_size"]),
        "context": (TensorProto.FLOAT, [1, NUM_CONTEXT]),
    }
    good = [helper.make_tensor_value_info(n, t, s) for n, (t, s) in spec.items()]
    path = tmp_path / "good.onnx"
    path.write_bytes(_graph(onnx, helper, good, meta))
    OnnxScorer(path)  # the well-formed graph loads
    if variant == "renamed_input":
        spec["ctx"] = spec.pop("context")
    elif variant == "wrong_dtype":
        spec["sets"] = (TensorProto.FLOAT, ["n_sets", "set_size"])
    elif variant == "wrong_rank":
        spec["context"] = (TensorProto.FLOAT, [NUM_CONTEXT])
    else:
        spec["events"] = (TensorProto.FLOAT, ["n_events", NUM_FEATURES - 1])
    bad = [helper.make_tensor_value_info(n, t, s) for n, (t, s) in spec.items()]
    path = tmp_path / f"{variant}.onnx"
    path.write_bytes(_graph(onnx, helper, bad, meta))
    with pytest.raises(SchemaMismatchError, match="graph does not match"):
        OnnxScorer(path)
