"""The controller never decides on an allocation that breaks the exact-B contract.

An allocator is user code (any object with ``allocate``): an allocation of the wrong size, for another
decision, repeating an event, or naming an event outside the history is refused, and the step falls back
to Recent-B with a ``CausalCacheWarning`` (never a crashed episode, never a silently different budget).
"""

from __future__ import annotations

import pytest

from causalcache_memory import Action, Generation, Trace
from causalcache_memory.allocation import Allocation, AllocationContext, recent_b
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.errors import CausalCacheWarning


class CountingPolicy:
    name = "counting"

    def __init__(self) -> None:
        self.calls: list[tuple[int | None, ...]] = []

    def generate(self, prompt) -> Generation:
        self.calls.append(tuple(i.event_index for i in prompt.images))
        return Generation(response="Action: type 1", action=Action("type", text="1"))


class FixedAllocator:
    """Returns ``Allocation(selected)`` as is: no ``make_allocation`` check on the allocator side."""

    name = "fixed"

    def __init__(self, selected: tuple[int, ...], *, uses_witness: bool, t_offset: int = 0) -> None:
        self.selected, self.uses_witness, self.t_offset = selected, uses_witness, t_offset

    def allocate(self, ctx: AllocationContext) -> Allocation:
        return Allocation(self.selected, ctx.t + self.t_offset, ctx.budget, self.name)


@pytest.fixture
def trace_archive(tmp_path, make_png):
    archive = LocalArchive(tmp_path / "a")
    trace = Trace("goal", episode_id="ep")
    trace.observe(archive.put(make_png((0, 0, 0))).sha256)
    for i in range(1, 9):  # t = 9, Recent-4 = (5, 6, 7, 8)
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", archive.put(make_png((i * 20, 0, 0))).sha256)
    return trace, archive


BAD = {
    "too-small": ((2, 7, 8), 0),
    "too-large": ((1, 2, 6, 7, 8), 0),
    "empty": ((), 0),
    "repeats-an-event": ((2, 2, 7, 8), 0),
    "outside-history": ((6, 7, 8, 9), 0),
    "zero-index": ((0, 6, 7, 8), 0),
    "other-decision": ((2, 6, 7, 8), 1),
    "stale-decision": ((2, 6, 7, 8), -1),  # a cached set from the previous step
}


@pytest.mark.parametrize("uses_witness", [True, False])
@pytest.mark.parametrize("case", sorted(BAD))
def test_an_allocation_breaking_exact_b_falls_back_to_recent_b(trace_archive, case, uses_witness) -> None:
    trace, archive = trace_archive
    selected, t_offset = BAD[case]
    policy = CountingPolicy()
    allocator = FixedAllocator(selected, uses_witness=uses_witness, t_offset=t_offset)
    ctl = MemoryController(policy=policy, archive=archive, allocator=allocator, budget=4)
    with pytest.warns(CausalCacheWarning, match=r"allocator 'fixed' .*falling back to Recent-B for step 9"):
        decision = ctl.decide(trace)
    ctl.close()
    assert decision.allocation.selected == recent_b(9, 4) == (5, 6, 7, 8)
    assert decision.allocation.is_recent and decision.fallback and "fixed" in decision.fallback
    assert not decision.second_pass
    assert policy.calls == [(5, 6, 7, 8, None)]  # one model call, on Recent-4 (+ the current screen)


@pytest.mark.parametrize("uses_witness", [True, False])
def test_a_valid_non_recent_allocation_is_used(trace_archive, uses_witness, recwarn) -> None:
    """Control case: the same allocator with an exact-B set is taken without a warning."""
    trace, archive = trace_archive
    policy = CountingPolicy()
    allocator = FixedAllocator((2, 6, 7, 8), uses_witness=uses_witness)
    ctl = MemoryController(policy=policy, archive=archive, allocator=allocator, budget=4)
    decision = ctl.decide(trace)
    ctl.close()
    assert decision.allocation.selected == (2, 6, 7, 8) and decision.fallback is None
    assert policy.calls[-1] == (2, 6, 7, 8, None)
    assert decision.second_pass == uses_witness
    assert not [w for w in recwarn if issubclass(w.category, CausalCacheWarning)]


def test_early_steps_accept_the_clipped_size_only(tmp_path, make_png) -> None:
    """At t=3 with B=4 the exact size is min(B, t-1) = 2: a 2-set is used, a 1-set falls back."""
    archive = LocalArchive(tmp_path / "a")
    trace = Trace("goal", episode_id="ep")
    trace.observe(archive.put(make_png((0, 0, 0))).sha256)
    for i in (1, 2):
        trace.record(Action("back"), f"r{i}", archive.put(make_png((i * 40, 0, 0))).sha256)
    ok = MemoryController(
        policy=CountingPolicy(),
        archive=archive,
        allocator=FixedAllocator((1, 2), uses_witness=False),
        budget=4,
    )
    assert ok.decide(trace).fallback is None
    short = MemoryController(
        policy=CountingPolicy(), archive=archive, allocator=FixedAllocator((2,), uses_witness=False), budget=4
    )
    with pytest.warns(CausalCacheWarning, match="falling back"):
        assert short.decide(trace).allocation.selected == (1, 2)


class WitnessRecorder(FixedAllocator):
    def __init__(self, selected: tuple[int, ...]) -> None:
        super().__init__(selected, uses_witness=True)
        self.witnesses: list = []

    def allocate(self, ctx: AllocationContext) -> Allocation:
        self.witnesses.append(ctx.witness)
        return super().allocate(ctx)


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_two_pass_record_accounts_for_both_passes(trace_archive, timeout) -> None:
    trace, archive = trace_archive
    policy = CountingPolicy()
    allocator = WitnessRecorder((2, 6, 7, 8))
    with MemoryController(
        policy=policy, archive=archive, allocator=allocator, budget=4, selector_timeout_s=timeout
    ) as ctl:
        decision = ctl.decide(trace)
    assert allocator.witnesses == [Action("type", text="1")]  # the pass-1 proposal is the witness
    assert policy.calls == [(5, 6, 7, 8, None), (2, 6, 7, 8, None)]
    record = decision.to_record()
    assert {k: record[k] for k in ("t", "budget", "allocator", "selected", "recent", "k", "second_pass")} == {
        "t": 9,
        "budget": 4,
        "allocator": "fixed",
        "selected": [2, 6, 7, 8],
        "recent": [5, 6, 7, 8],
        "k": 1,
        "second_pass": True,
    }
    assert len(record["pass_latency_ms"]) == 2 and all(x >= 0 for x in record["pass_latency_ms"])
    assert record["proposal"]["type"] == "type" and record["fallback"] is None


def test_two_pass_disabled_runs_one_pass_without_a_witness(trace_archive) -> None:
    trace, archive = trace_archive
    policy = CountingPolicy()
    allocator = WitnessRecorder((2, 6, 7, 8))
    with MemoryController(
        policy=policy, archive=archive, allocator=allocator, budget=4, two_pass=False
    ) as ctl:
        decision = ctl.decide(trace)
    assert allocator.witnesses == [None] and policy.calls == [(2, 6, 7, 8, None)]
    assert not decision.second_pass and decision.proposal is None
    assert "proposal" not in decision.to_record()
