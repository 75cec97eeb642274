"""The adapted policy (HGKV on the embedded runtime) serves as selector labeller and in the two-pass loop."""

from __future__ import annotations

from causalcache_lab.selector.labels import LabelConfig, read_labels, run_labelling
from causalcache_memory.allocation import AllocationContext, make_allocation, recent_b
from causalcache_memory.controller import MemoryController
from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter, HGKVConfig


def _adapted(load_policy, randomize):
    policy = load_policy()
    adapter = HGKVAdapter.attach(policy.model, HGKVConfig(gated=True))
    randomize(adapter, scale=0.2)
    policy.adapter = adapter
    return policy


def test_adapted_policy_labels_selector_states(load_policy, randomize, recall_data, tmp_path) -> None:
    policy = _adapted(load_policy, randomize)
    out = tmp_path / "labels.jsonl"
    config = LabelConfig(
        budgets=(1,), path_length=1, path_candidates=2, max_states_per_trajectory=1, batch_size=8
    )
    run_labelling(
        policy, recall_data["archive"], recall_data["trajectories"][:2], out, config, progress=False
    )
    header, records = read_labels(out)
    assert records and header["labeller"] == policy.name
    for record in records:
        assert isinstance(record["anchor"], float) and record["anchor"] <= 0.0
        assert record["groups"] and record["prompts_scored"] >= 2  # singleton swaps, each a complete prompt


class _SwapOldest:
    """Witness-taking allocation that always promotes event 1 (forces pass 2)."""

    name = "swap_oldest"
    uses_witness = True

    def allocate(self, ctx: AllocationContext):
        recent = list(recent_b(ctx.t, ctx.budget))
        if recent and 1 not in recent:
            recent[0] = 1
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name)


def test_adapted_policy_runs_the_two_pass_redecision(load_policy, randomize, recall_data) -> None:
    policy = _adapted(load_policy, randomize)
    trajectory = recall_data["trajectories"][0]
    trace = trajectory.trace_at(len(trajectory.steps))
    ctl = MemoryController(
        policy=policy,
        archive=recall_data["archive"],
        allocator=_SwapOldest(),
        budget=1,
        selector_timeout_s=None,
    )
    decision = ctl.decide(trace)
    assert decision.second_pass and decision.allocation.selected == (1,)
    assert isinstance(decision.response, str) and len(decision.pass_latency_s) == 2
