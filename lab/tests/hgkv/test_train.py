"""DiD training on the tiny model: a fast smoke test, the done-when run (slow) and its CUDA twin (gpu)."""

from __future__ import annotations

import pytest
import torch

from causalcache_lab.hgkv.train import TrainConfig, evaluate, train_did
from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter, HGKVConfig

#: the done-when run: measured on a shared 2-core CPU at ~0.6-0.9 s/step (12 prompts per step)
# "Done when" thresholds from the specification (paper, HGKV objective: m = 0.01, epsilon = 0.02)
SPEC_MARGIN, SPEC_EPS = 0.01, 0.02
DONE_WHEN = TrainConfig(steps=60, lr=5e-3, batch_size=4, eval_every=10, seed=0, bootstrap_reps=500)


def _setup(load_policy, make_scorer, *, gated: bool = True, **policy_kwargs):
    policy = load_policy(**policy_kwargs)
    adapter = HGKVAdapter.attach(policy.model, HGKVConfig(gated=gated))
    policy.adapter = adapter
    return policy, adapter, make_scorer(policy)


def _split(recall_data, name):
    return [g for g in recall_data["groups"] if g.split == name]


def test_smoke_training_updates_only_the_adapter_and_logs_dev_gates(
    load_policy, make_scorer, recall_data
) -> None:
    policy, adapter, scorer = _setup(load_policy, make_scorer)
    base = {n: p.detach().clone() for n, p in policy.model.named_parameters() if not p.requires_grad}
    train = _split(recall_data, "train")[:4]
    dev = _split(recall_data, "dev")[:3]
    config = TrainConfig(steps=3, lr=1e-2, batch_size=2, eval_every=2, bootstrap_reps=100)
    result = train_did(scorer, adapter, train, dev, config)
    assert [h["step"] for h in result.history] == [2, 3]
    assert all(set(h["dev"]) == {g.budget for g in dev} for h in result.history)
    assert any(torch.count_nonzero(m.B) for m in adapter.modules.values())  # B left zero
    for name, p in policy.model.named_parameters():
        if name in base:
            assert torch.equal(p, base[name]), name
    assert result.seconds_per_step > 0 and adapter.state.mask is None


def test_training_inputs_are_validated(load_policy, make_scorer, recall_data) -> None:
    _policy, adapter, scorer = _setup(load_policy, make_scorer)
    with pytest.raises(ConfigError, match="train and dev groups"):
        train_did(scorer, adapter, _split(recall_data, "train"), [])
    other = HGKVAdapter.attach(load_policy().model)
    with pytest.raises(ConfigError, match="must be the adapter being trained"):
        train_did(scorer, other, _split(recall_data, "train"), _split(recall_data, "dev"))
    with pytest.raises(ConfigError) as info:
        TrainConfig(steps=0, lr=0, batch_size=0)
    assert len(info.value.errors) == 3


def _done_when(load_policy, make_scorer, recall_data, **policy_kwargs):
    _policy, adapter, scorer = _setup(load_policy, make_scorer, **policy_kwargs)
    train, dev = _split(recall_data, "train"), _split(recall_data, "dev")
    before = evaluate(scorer, adapter, dev, reps=200)
    assert all(s.did_select.mean == 0.0 for s in before.values())  # identity adapter: exactly zero
    result = train_did(scorer, adapter, train, dev, DONE_WHEN)
    assert result.selected_step is not None  # the gates picked a checkpoint
    eps, m = SPEC_EPS, SPEC_MARGIN  # the spec's thresholds, not whatever DiDHyper() defaults to today
    figures = {}
    for name, groups in (("train", train), ("dev", dev)):
        stats = evaluate(scorer, adapter, groups, reps=500)
        assert set(stats) == {1, 2, 4}
        for b, s in stats.items():
            figures[(name, b)] = (s.did_select.mean, s.abs_recent.mean, s.wrong_drift.mean)
            assert s.did_select.mean > m, (name, b, s)
            assert s.abs_recent.mean < eps and s.wrong_drift.mean < eps, (name, b, s)
    return result, figures


@pytest.mark.slow  # ~40 s; runs in the default suite and CI (deselect locally with -m "not slow")
def test_done_when_did_select_above_margin_inside_the_drift_envelope(
    load_policy, make_scorer, recall_data
) -> None:
    result, figures = _done_when(load_policy, make_scorer, recall_data)
    print(f"selected step {result.selected_step}, {result.seconds_per_step:.3f} s/step", figures)


@pytest.mark.gpu
def test_done_when_on_cuda(load_policy, make_scorer, recall_data) -> None:
    if not torch.cuda.is_available():
        pytest.skip("CUDA is not available")
    result, figures = _done_when(load_policy, make_scorer, recall_data, device="cuda", dtype="float32")
    print(f"cuda: selected step {result.selected_step}, {result.seconds_per_step:.3f} s/step", figures)
