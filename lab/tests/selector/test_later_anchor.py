"""The later-swap anchor (lab/selector/later_anchor.py): the base path's second decisions, the term's value
and gradient, and a fine-tune it holds near the base on the second swap (its refusals: test_decision_loss)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from example_splits import SMOKE, by_trajectory, negated  # noqa: E402

from causalcache_lab.selector.batches import collate  # noqa: E402
from causalcache_lab.selector.examples import StateExample  # noqa: E402
from causalcache_lab.selector.later_anchor import later_anchor_loss, second_decisions  # noqa: E402
from causalcache_lab.selector.train import TrainConfig, train_selector  # noqa: E402

TAU = 0.5


def _state(tid: str = "tr") -> StateExample:
    """t = 7, B = 3: Recent-B = {4, 5, 6}; distant events 1 and 2. Three first decisions (out 4, 5, 6),
    each with candidates 1 and 2 and its keep row (cand == out)."""
    conds = [(5, 6), (4, 6), (4, 5)]
    group, cand, out = [], [], []
    for k, r in enumerate((4, 5, 6)):
        for j in (1, 2, r):
            group.append(k)
            cand.append(j - 1)
            out.append(r - 1)
    rng = np.random.default_rng(0)
    return StateExample(
        tid, 7, 3, rng.normal(size=(6, 4)).astype(np.float32), np.zeros((1, 2), np.float32),
        conds=conds, group=np.array(group), cand=np.array(cand), out=np.array(out),
        y=np.zeros(len(group), np.float32), from_recent=np.array([True, True, True]),
    )  # fmt: skip


def _linear_scorer(w: torch.Tensor):  # type: ignore[no-untyped-def]
    """A set scorer with a closed form: Δ̂(j | S) = w · x_j + (number of members of S) · x_j[0]."""

    def score(events, sets, mask, context):  # type: ignore[no-untyped-def]
        return (events @ w)[None, :] + mask.sum(1, keepdim=True) * events[:, 0][None, :]

    return score


def test_the_second_decisions_follow_the_base_first_swap():
    tx = collate([_state()])
    # the base's first swap: out 5 for 2 (entry 4 of 9: group 1, cand row 1)
    d_base = torch.tensor([0.1, 0.2, 0.0, 0.3, 0.9, 0.0, -0.2, 0.4, 0.0])
    second = second_decisions(tx, d_base)
    assert second is not None
    members = [sorted(int(e) + 1 for e in row) for row in second["sets"]]
    # S_1 = {4, 6} ∪ {2}; each second decision drops one recent member: C_1 = {2, 6} and {4, 2}
    assert members == [[2, 6], [2, 4]]
    assert (second["out"] + 1).tolist() == [4, 6]  # the evicted recent event of each row
    # the moves' candidates: the first decision's other candidate (event 1) only
    assert second["cands"].tolist() == [[True, False, False, False, False, False]] * 2


def test_a_state_without_another_candidate_has_no_second_decision():
    ex = _state()
    keep = ex.cand != 0  # drop candidate event 1: only event 2 is left, taken by the first swap
    ex.group, ex.cand, ex.out, ex.y = ex.group[keep], ex.cand[keep], ex.out[keep], ex.y[keep]
    tx = collate([ex])
    assert second_decisions(tx, torch.zeros(len(tx["y"]))) is None
    zero = later_anchor_loss(lambda *a: None, lambda *a: None, tx, torch.zeros(len(tx["y"])), tau=TAU)
    assert zero.item() == 0.0


def test_the_term_is_the_mean_absolute_gain_difference_in_tau_units():
    tx = collate([_state(), _state("other")])
    d_base = torch.tensor([0.1, 0.2, 0.0, 0.3, 0.9, 0.0, -0.2, 0.4, 0.0] * 2)
    w_base = torch.tensor([0.5, -1.0, 0.25, 2.0])
    w = (w_base + torch.tensor([0.3, 0.1, -0.2, 0.0])).requires_grad_(True)
    base, model = _linear_scorer(w_base), _linear_scorer(w)
    value = later_anchor_loss(model, base, tx, d_base, tau=TAU)
    # by hand: every row has two members, so g(q, j) = (w·x_j + 2 x_j0) - (w·x_q + 2 x_q0) and the
    # difference to the base is (w - w_base)·(x_j - x_q); candidate j = event 1, q in {4, 6}, per state
    x = tx["events"]
    diffs = []
    for offset in (0, 6):
        for q in (4, 6):
            diffs.append(abs(float((w - w_base).detach() @ (x[offset + 0] - x[offset + q - 1]))) / TAU)
    assert value.item() == pytest.approx(np.mean(diffs), rel=1e-5)
    value.backward()
    assert w.grad is not None and float(w.grad.abs().sum()) > 0  # it moves the model
    assert later_anchor_loss(base, base, tx, d_base, tau=TAU).item() == 0.0  # the base itself: no term


def _second_gap(model, base, examples) -> float:  # type: ignore[no-untyped-def]
    """Mean |g - g_base| over the base path's second decisions of ``examples`` (in target-scale units)."""
    from causalcache_lab.selector.batch_loss import entry_diffs

    gaps = []
    with torch.no_grad():
        for ex in examples:
            tx = collate([ex])
            gaps.append(later_anchor_loss(model, base, tx, entry_diffs(base, tx), tau=1.0).item())
    return float(np.mean(gaps))


def test_a_fine_tune_with_the_term_keeps_the_second_swap_nearer_the_base(trained):
    """From the stand-in scorer, fine-tuned on its states with every target negated (so the choice term
    pulls far from the base, and dev keeps a later epoch): with ``decision_later_weight`` the second-swap
    gains stay nearer the base's than without it, on the same data, seed and epochs."""
    from causalcache_lab.selector.base_model import load_base

    result, out, examples = trained
    data = negated(by_trajectory(examples))
    base = load_base(str(out), result.model.config)
    frozen = result.model.eval()

    def fine_tune(weight: float):  # type: ignore[no-untyped-def]
        cfg = TrainConfig(
            init_from=str(out), loss="decision", epochs=4, patience=100, lr=3e-3, seed=0,
            split_by="metadata", decision_later_weight=weight, fine_tune_gate=None, **SMOKE,
        )  # fmt: skip
        return train_selector(data, cfg, export_onnx=False)

    free, held = fine_tune(0.0), fine_tune(5.0)
    assert (
        free.metadata["init_from"]["epochs_fine_tuned"] > 0 < held.metadata["init_from"]["epochs_fine_tuned"]
    )
    assert base.target_scale == pytest.approx(result.metadata["target_scale"])
    free_gap, held_gap = _second_gap(free.model, frozen, examples), _second_gap(held.model, frozen, examples)
    assert free_gap > 0.02  # the free fine-tune moved the second swap's gains
    assert held_gap < 0.5 * free_gap
