"""The decision loss (lab/selector/decision_loss.py): its value, its gradients, and a selector trained with it."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from causalcache_lab.selector.decision_loss import decision_loss  # noqa: E402
from causalcache_lab.selector.train import TrainConfig, train_selector  # noqa: E402

TAU, SCALE = 0.5, 1.0


def block(d, y, state, recent):
    """A collated block in the shape :func:`collate` gives the loss (only the fields it reads)."""
    return (
        torch.tensor(d, dtype=torch.float32, requires_grad=True),
        {
            "y": torch.tensor(y, dtype=torch.float32),
            "state": torch.tensor(state),
            "recent": torch.tensor(recent),
            "states": max(state) + 1,
        },
    )


def loss(d, tx, keep_weight=0.2, min_gain=0.5, rank=0.0):
    return decision_loss(
        d, tx, SCALE, tau=TAU, min_gain=min_gain, keep_weight=keep_weight, state_rank_weight=rank
    )


def test_value_is_the_weighted_choice_cross_entropy():
    # state 0: swaps with gains (y) 2.0 and -1.0 -> target the first; state 1: no swap helps -> keep.
    # the last entry of each state is its "keep" row (cand == out), which collate marks not-recent.
    d, tx = block(
        [0.3, -0.2, 0.0, 0.4, 0.1, 0.0],
        [2.0, -1.0, 0.0, 0.1, -0.5, 0.0],
        [0, 0, 0, 1, 1, 1],
        [True, True, False, True, True, False],
    )
    z0 = [0.3 / TAU, -0.2 / TAU]
    z1 = [0.4 / TAU, 0.1 / TAU]
    lse = lambda zs: math.log(1.0 + sum(math.exp(z) for z in zs))  # noqa: E731
    expected = ((lse(z0) - z0[0]) + 0.2 * lse(z1)) / 2
    assert loss(d, tx).item() == pytest.approx(expected, rel=1e-6)


def test_gradients_raise_the_helping_swap_and_lower_swaps_of_a_keep_state():
    d, tx = block([0.0, 0.0, 0.0, 0.0], [2.0, 0.01, 0.01, -3.0], [0, 0, 1, 1], [True, True, True, True])
    loss(d, tx).backward()
    g = d.grad.numpy()
    assert g[0] < 0 < g[1]  # state 0 (helped): the best swap's d goes up, the other's down
    assert g[2] > 0 and g[3] > 0  # state 1 (gain 0.01 below min_gain): every swap's d goes down (keep)


def test_teacher_path_entries_and_states_without_a_recent_swap_take_no_part():
    d, tx = block([0.5, 0.9, 0.2], [1.0, 5.0, 0.0], [0, 0, 1], [True, False, False])
    out = loss(d, tx)
    out.backward()
    assert d.grad[1] == 0 and d.grad[2] == 0  # a path entry with a larger label is not the target
    # one state with a choice, target its only swap (y = 1.0 > min_gain); the mean is over both states
    assert out.item() == pytest.approx((math.log(1 + math.exp(0.5 / TAU)) - 0.5 / TAU) / 2, rel=1e-6)


def test_keep_weight_zero_trains_on_helped_states_only():
    d, tx = block([0.7, 0.4], [0.0, 0.0], [0, 1], [True, True])
    assert loss(d, tx, keep_weight=0.0).item() == 0.0


def test_the_state_rank_term_is_the_mean_pairwise_softplus_across_helped_and_unhelped_states():
    # state 0 helped (target d 0.3); state 1 unhelped (top d 0.4); state 2 unhelped (top d -0.1);
    # state 3 has no swap out of Recent-B (no part)
    d, tx = block(
        [0.3, -0.2, 0.4, 0.1, -0.1, 0.9],
        [2.0, -1.0, 0.1, -0.5, 0.0, 5.0],
        [0, 0, 1, 1, 2, 3],
        [True, True, True, True, True, False],
    )
    base = loss(d, tx, keep_weight=0.0).item()
    rank = lambda m: math.log1p(math.exp((m - 0.3) / TAU))  # noqa: E731
    expected = base + 0.5 * (rank(0.4) + rank(-0.1)) / 2
    assert loss(d, tx, keep_weight=0.0, rank=0.5).item() == pytest.approx(expected, rel=1e-6)
    loss(d, tx, keep_weight=0.0, rank=0.5).backward()
    g = d.grad.numpy()
    # the helped state's target goes up; each unhelped state's *top* swap goes down, its others untouched
    assert g[0] < 0 and g[2] > 0 and g[4] > 0 and g[3] == 0.0 and g[5] == 0.0


def test_the_state_rank_term_needs_both_kinds_of_state_and_a_weight():
    helped_only, tx = block([0.3, -0.2], [2.0, 0.0], [0, 0], [True, True])
    assert loss(helped_only, tx, keep_weight=0.0, rank=1.0).item() == pytest.approx(
        loss(helped_only, tx, keep_weight=0.0).item()
    )
    d, tx = block([0.3, 0.4], [2.0, 0.0], [0, 1], [True, True])
    assert loss(d, tx, keep_weight=0.0, rank=0.0).item() == loss(d, tx, keep_weight=0.0).item()
    assert loss(d, tx, keep_weight=0.0, rank=1.0).item() > loss(d, tx, keep_weight=0.0).item()


def test_the_anchor_holds_unhelped_states_top_gain_at_or_below_the_base():
    # state 0 helped; state 1 unhelped, its top rose above the base's (0.4 against 0.1); state 2 unhelped,
    # below the base's (no term); state 3 has no swap out of Recent-B (no part)
    y, state = [2.0, -1.0, 0.1, -0.5, 0.0, 5.0], [0, 0, 1, 1, 2, 3]
    recent = [True, True, True, True, True, False]
    d, tx = block([0.3, -0.2, 0.4, 0.1, -0.1, 0.9], y, state, recent)
    d_base = torch.tensor([0.9, 0.9, 0.1, -0.3, 0.2, 0.9])

    def anchored(weight):
        return decision_loss(
            d, tx, SCALE, tau=TAU, min_gain=0.5, keep_weight=0.0, anchor_weight=weight, d_base=d_base
        )

    plain = loss(d, tx, keep_weight=0.0).item()
    assert anchored(0.7).item() == pytest.approx(plain + 0.7 * ((0.4 - 0.1) / TAU + 0.0) / 2, rel=1e-6)
    assert anchored(0.0).item() == pytest.approx(plain)
    anchored(0.7).backward()
    g = d.grad.numpy()
    anchor_only = g - torch.autograd.grad(loss(d, tx, keep_weight=0.0), d)[0].numpy()
    # only the risen unhelped state's top swap is pushed down; the helped state, the fallen one and the
    # risen state's other swap are untouched
    assert anchor_only[2] > 0 and np.allclose(np.delete(anchor_only, 2), 0.0)


@pytest.mark.parametrize("field", ["decision_anchor_weight", "decision_later_weight"])
def test_the_base_terms_need_a_base_and_the_decision_loss(field):
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=rf"train\.{field}=1\.0 .*train\.init_from \(got None\)"):
        TrainConfig(loss="decision", **{field: 1.0})
    with pytest.raises(ConfigError, match=r"train\.loss: decision \(got 'regression'\).*: 0"):
        TrainConfig(init_from="bundled", **{field: 1.0})
    TrainConfig(init_from="bundled", loss="decision", **{field: 1.0})  # accepted


def path_block(d, y, state, recent, decision, path):
    d, tx = block(d, y, state, recent)
    tx.update(decision=torch.tensor(decision), path=torch.tensor(path), decisions=max(decision) + 1)
    return d, tx


def test_path_decisions_are_each_a_choice_with_its_own_anchor():
    # state 0: first decision (entries 0-1, helped by entry 0), then a teacher-path decision (entries 2-3)
    # helped by entry 3; state 1: first decision unhelped, a path decision (entries 6-7) unhelped whose top
    # rose above the base's (0.6 against 0.2). Keep rows (cand == out) are in neither mask.
    d, tx = path_block(
        [0.3, -0.2, 0.1, 0.2, 0.0, -0.1, 0.6, -0.4],
        [2.0, -1.0, -0.5, 1.5, 0.0, 0.0, 0.1, -2.0],
        [0, 0, 0, 0, 1, 1, 1, 1],
        [True, True, False, False, False, True, False, False],
        [0, 0, 1, 1, 2, 2, 3, 3],
        [False, False, True, True, False, False, True, True],
    )
    d_base = torch.tensor([0.3, -0.2, 0.1, 0.2, 0.0, -0.1, 0.2, -0.4])

    def total(path_weight, anchor_weight=0.5):
        return decision_loss(
            d, tx, SCALE, tau=TAU, min_gain=0.5, keep_weight=0.0, anchor_weight=anchor_weight,
            d_base=d_base, path_weight=path_weight,
        )  # fmt: skip

    lse = lambda zs: math.log(1.0 + sum(math.exp(z / TAU) for z in zs))  # noqa: E731
    path_choice = (lse([0.1, 0.2]) - 0.2 / TAU) / 2  # over the batch's two states, as the first term
    path_anchor = (0.6 - 0.2) / TAU  # the one unhelped path decision's rise
    assert total(0.0).item() == pytest.approx(loss(d, tx, keep_weight=0.0).item(), rel=1e-6)  # no anchor rise
    assert total(0.8).item() == pytest.approx(total(0.0).item() + 0.8 * (path_choice + 0.5 * path_anchor))
    total(0.8).backward()
    g = d.grad.numpy()
    assert g[3] < 0 < g[2]  # the path decision's helping swap goes up, its other swap down
    assert g[6] > 0 and g[7] == 0.0  # the risen unhelped path decision's top swap is pushed down only


def test_collate_marks_the_teacher_path_decisions_of_each_state():
    from causalcache_lab.selector.batches import collate
    from causalcache_lab.selector.examples import StateExample

    def example(decision):
        # groups: two out of Recent-B (decision 0), one from the teacher path's next set (decision 1)
        return StateExample(
            "tr", 6, 2, np.zeros((5, 3), np.float32), np.zeros((1, 2), np.float32),
            conds=[(4,), (5,), (1, 5)], group=np.array([0, 0, 1, 2, 2]), cand=np.array([0, 2, 1, 1, 4]),
            out=np.array([4, 2, 3, 4, 4]), y=np.zeros(5, np.float32), from_recent=np.array([True, True, False]),
            decision=decision,
        )  # fmt: skip

    tx = collate([example(np.array([0, 0, 1])), example(np.array([0, 0, 1]))])
    assert tx["path"].tolist() == [False, False, False, True, False] * 2  # a swap of the later set only
    assert tx["recent"].tolist() == [True, False, True, False, False] * 2
    assert tx["decision"].tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 3, 3] and tx["decisions"] == 4
    unknown = collate([example(np.zeros(0, np.int64))])  # examples built without decisions: no path term
    assert not unknown["path"].any()


def test_build_examples_numbers_each_base_set_as_one_decision():
    from causalcache_lab.selector.examples import _decisions

    groups = [{"base": [3, 4]}, {"base": [4, 3]}, {"base": [1, 4]}, {"base": [1, 3]}, {"base": [1, 4]}]
    assert _decisions(groups).tolist() == [0, 0, 1, 2, 1]


def test_path_decisions_need_the_decision_loss():
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.decision_path_weight=1\.0 .*train\.loss: decision"):
        TrainConfig(decision_path_weight=1.0)
    TrainConfig(loss="decision", decision_path_weight=1.0)  # accepted


def test_a_selector_trained_with_the_decision_loss_picks_the_useful_event(world, labelled):
    """Trained from scratch on the stand-in world's labels, the decision loss alone makes a selector
    whose dev choices gain (dev value well above keeping Recent-B, which is 0) and pass calibration."""
    from causalcache_lab.selector.train import build_examples
    from causalcache_memory.selector.features import FeatureExtractor

    trajs, _ = world
    _, _, records = labelled
    examples = build_examples(records, {t.trajectory_id: t for t in trajs}, extractor=FeatureExtractor())
    result = train_selector(examples, TrainConfig(epochs=15, seed=0, loss="decision"), export_onnx=False)
    dev = result.metadata["metrics"]["dev"]
    assert dev["value"] > 0.5 * dev["oracle"] > 0
    assert result.metadata["calibration"]["dev_gain"] > 0
    assert np.isfinite(result.metadata["history"][-1]["train_loss"])


def test_an_unknown_loss_is_refused_naming_the_field_the_value_and_the_choices():
    from causalcache_memory.errors import ConfigError

    with pytest.raises(ConfigError, match=r"train\.loss='decisions'.*'regression' or 'decision'"):
        TrainConfig(loss="decisions")
