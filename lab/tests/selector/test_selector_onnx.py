from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from selector_synth import DictArchive, MarkerPolicy, make_trajectories

from causalcache_memory.allocation import AllocationContext, RecentAllocator, recent_b
from causalcache_memory.errors import SchemaMismatchError, SelectorError
from causalcache_memory.render import render_prompt
from causalcache_memory.selector.allocator import SelectorAllocator
from causalcache_memory.selector.features import NUM_CONTEXT, NUM_FEATURES
from causalcache_memory.selector.onnx_scorer import OnnxScorer

ATOL = 1e-5


@pytest.mark.parametrize("n_events", [3, 37, 300, 1000])
def test_onnx_reproduces_torch_scores(trained, n_events):
    torch = pytest.importorskip("torch")
    from causalcache_lab.selector.model import pack_sets

    result, out, _ = trained
    rng = np.random.default_rng(n_events)
    events = rng.normal(size=(n_events, NUM_FEATURES)).astype(np.float32)
    context = rng.normal(size=(1, NUM_CONTEXT)).astype(np.float32)
    sets = [
        tuple(sorted(rng.choice(np.arange(1, n_events + 1), size=min(k, n_events), replace=False)))
        for k in (0, 1, 2, 3)
    ]
    onnx_scores = OnnxScorer(out).score_sets(events, sets, context)
    rows, mask = pack_sets(sets)
    with torch.no_grad():
        ref = result.model(
            torch.from_numpy(events), torch.tensor(rows), torch.tensor(mask), torch.from_numpy(context)
        )
    assert onnx_scores.shape == (len(sets), n_events)
    np.testing.assert_allclose(onnx_scores, ref.numpy(), atol=ATOL, rtol=1e-5)


def test_metadata_describes_the_model(trained):
    _, out, _ = trained
    meta = OnnxScorer(out).metadata
    assert meta["causalcache.model_format_version"] == "3"  # 3: pass-2 frontier, robust OOD guard
    assert "stand-in marker world" in meta["causalcache.training_data"]
    assert len(OnnxScorer(out).feature_names) == NUM_FEATURES


def test_schema_mismatch_is_refused(trained, tmp_path):
    onnx = pytest.importorskip("onnx")
    _, out, _ = trained
    proto = onnx.load(str(out / "selector.onnx"))
    for p in proto.metadata_props:
        if p.key == "causalcache.schema_hash":
            p.value = "0123456789abcdef"
    bad = tmp_path / "bad.onnx"
    onnx.save(proto, str(bad))
    with pytest.raises(SchemaMismatchError, match="0123456789abcdef") as info:
        OnnxScorer(bad)
    assert "retrain" in str(info.value)
    with pytest.raises(SelectorError, match="does not exist"):
        OnnxScorer(tmp_path / "missing.onnx")


def test_policy_allocates_exact_b_with_the_witness(trained):
    _, out, _ = trained
    # no pass-2 share limit: about a quarter of these states need a distant event, above the default 15%
    selector = SelectorAllocator(out, second_pass_share=1.0)
    inverted = SelectorAllocator(out, inverted=True)
    assert selector.name == "selector" and selector.uses_witness
    trajs, useful = make_trajectories(4, length=14, seed=11)
    scorer = MarkerPolicy(useful)
    found = needed = 0
    margins, inv_margins = [], []
    for traj in trajs:
        for t in range(3, 15):
            target = traj.steps[t - 1]
            ctx = AllocationContext(traj.trace_at(t), 2, witness=target.action)
            alloc, inv = selector.allocate(ctx), inverted.allocate(ctx)
            assert len(alloc.selected) == min(2, t - 1) and alloc.allocator == "selector"
            assert inv.allocator == "selector_inverted"
            good = {
                j for j in range(1, t - 2) if traj.steps[j - 1].screenshot_after in useful[target.response]
            }
            needed += bool(good)
            found += bool(good & set(alloc.selected))
            q = scorer.score(
                [render_prompt(ctx.trace, a).bind(DictArchive()) for a in (alloc, inv)]
                + [render_prompt(ctx.trace, RecentAllocator().allocate(ctx)).bind(DictArchive())],
                [target.response] * 3,
            )
            margins.append(q[0] - q[2])
            inv_margins.append(q[1] - q[2])
    assert needed >= 5 and found >= 0.8 * needed  # the useful distant event is restored when it exists
    assert np.mean(margins) > 0.1 and np.mean(margins) > np.mean(inv_margins) + 0.1
    no_witness = selector.allocate(AllocationContext(trajs[0].trace_at(10), 4))
    assert len(no_witness.selected) == 4 and set(no_witness.selected) <= set(range(1, 10))
    assert selector.allocate(AllocationContext(trajs[0].trace_at(4), 4)).selected == recent_b(4, 4)


def test_bundled_model_missing_is_a_clear_error(monkeypatch):
    from causalcache_memory.selector import allocator as mod

    monkeypatch.setattr(mod, "BUNDLED_MODEL", ("causalcache_memory", "assets/selector/absent.onnx"))
    with pytest.raises(SelectorError, match="no bundled selector model"):
        SelectorAllocator()


def test_onnx_path_does_not_import_torch(trained):
    _, out, _ = trained
    code = (
        f"import sys; sys.path.insert(0, {str(Path(__file__).resolve().parent)!r});"
        "from selector_synth import DictArchive, MarkerPolicy, make_trajectories;"
        "from causalcache_memory.allocation import AllocationContext;"
        "from causalcache_memory.selector.allocator import SelectorAllocator;"
        f"p = SelectorAllocator({str(out)!r});"
        "tr = make_trajectories(1, length=12)[0][0];"
        "p.allocate(AllocationContext(tr.trace_at(12), 4, witness=tr.steps[11].action));"
        "assert 'torch' not in sys.modules, 'torch was imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
