"""Two-pass re-decision and fallback semantics of the MemoryController."""

from __future__ import annotations

import time

import pytest

from causalcache_memory import Action, Generation, Trace, make_allocation
from causalcache_memory.allocation import AllocationContext, RandomAllocator, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.errors import CausalCacheWarning, PromptImageError


class ImageSensitivePolicy:
    """Types the code if the evidence screenshot is among the prompt's images, else guesses."""

    name = "fake"

    def __init__(self, evidence_sha: str) -> None:
        self.evidence = evidence_sha
        self.calls: list[tuple[int | None, ...]] = []

    def generate(self, prompt) -> Generation:
        self.calls.append(tuple(i.event_index for i in prompt.images))
        seen = any(i.sha256 == self.evidence for i in prompt.images)
        text = "A7K2" if seen else "0000"
        return Generation(response=f"Action: type {text}", action=Action("type", text=text))

    def score(self, prompts, targets):  # pragma: no cover - not used here
        return [0.0 for _ in prompts]


class WitnessAllocator:
    """Swaps event 2 in whenever the witness is a type action (a stand-in for the learned selector)."""

    name = "witness"
    uses_witness = True

    def __init__(self) -> None:
        self.witnesses: list[Action | None] = []

    def allocate(self, ctx: AllocationContext):
        self.witnesses.append(ctx.witness)
        recent = list(RecentAllocator().allocate(ctx).selected)
        if ctx.witness is not None and ctx.witness.type == "type" and 2 not in recent and recent:
            recent[0] = 2
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name)


class BrokenAllocator:
    name = "broken"
    uses_witness = True

    def allocate(self, ctx):
        raise RuntimeError("model file missing")


class SlowAllocator:
    name = "slow"
    uses_witness = True

    def allocate(self, ctx):
        time.sleep(0.5)
        return RecentAllocator().allocate(ctx)


@pytest.fixture
def setup(tmp_path, make_png):
    archive = LocalArchive(tmp_path / "a")
    trace = Trace("Send the code to Alice", episode_id="ep")
    controller_shots = [archive.put(make_png((i * 9, 0, 0))).sha256 for i in range(9)]
    trace.observe(controller_shots[0])
    for i in range(1, 9):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", controller_shots[i])
    evidence = trace.event(2).screenshot
    return archive, trace, evidence


def test_pass_two_fires_only_when_a_recent_step_is_displaced(setup) -> None:
    archive, trace, evidence = setup
    policy = ImageSensitivePolicy(evidence)
    allocator = WitnessAllocator()
    ctl = MemoryController(policy=policy, archive=archive, allocator=allocator, budget=4)
    decision = ctl.decide(trace)
    assert decision.second_pass
    assert decision.proposal.action.text == "0000"  # pass 1 on Recent-4 could not see event 2
    assert decision.action.text == "A7K2"  # pass 2 replaces the proposal
    assert decision.allocation.selected == (2, 6, 7, 8) and decision.allocation.k == 1
    assert policy.calls == [(5, 6, 7, 8, None), (2, 6, 7, 8, None)]
    assert allocator.witnesses[0].text == "0000"  # the proposal is the witness
    record = decision.to_record()
    assert record["second_pass"] and record["k"] == 1 and len(record["pass_latency_ms"]) == 2


def test_no_second_call_when_selector_keeps_recent(setup) -> None:
    archive, trace, _ = setup
    policy = ImageSensitivePolicy(trace.event(8).screenshot)
    allocator = WitnessAllocator()

    class Click(ImageSensitivePolicy):
        def generate(self, prompt):
            super().generate(prompt)
            return Generation("Action: click", Action("click", x=0.1, y=0.1))

    policy = Click(trace.event(8).screenshot)
    ctl = MemoryController(policy=policy, archive=archive, allocator=allocator, budget=4)
    decision = ctl.decide(trace)
    assert not decision.second_pass and decision.allocation.is_recent
    assert len(policy.calls) == 1 and decision.generation is decision.proposal


@pytest.mark.parametrize("allocator", [RecentAllocator(), RandomAllocator(seed=1)])
def test_policies_without_witness_run_one_pass(setup, allocator) -> None:
    archive, trace, evidence = setup
    policy = ImageSensitivePolicy(evidence)
    decision = MemoryController(policy=policy, archive=archive, allocator=allocator, budget=4).decide(trace)
    assert len(policy.calls) == 1 and not decision.second_pass and decision.proposal is None


@pytest.mark.parametrize(
    ("allocator", "reason"), [(BrokenAllocator(), "model file missing"), (SlowAllocator(), "exceeded")]
)
def test_selector_failure_falls_back_to_recent(setup, allocator, reason) -> None:
    archive, trace, evidence = setup
    policy = ImageSensitivePolicy(evidence)
    ctl = MemoryController(
        policy=policy, archive=archive, allocator=allocator, budget=4, selector_timeout_s=0.1
    )
    with pytest.warns(CausalCacheWarning, match="falling back to Recent-B"):
        decision = ctl.decide(trace)
    assert decision.allocation.is_recent and reason in decision.fallback
    assert not decision.second_pass and len(policy.calls) == 1
    ctl.close()


def test_missing_screenshot_is_an_error_not_a_different_prompt(setup, tmp_path) -> None:
    _, trace, evidence = setup
    empty = LocalArchive(tmp_path / "empty")
    ctl = MemoryController(
        policy=ImageSensitivePolicy(evidence), archive=empty, allocator=RecentAllocator(), budget=2
    )
    with pytest.raises(PromptImageError, match="event 7"):
        ctl.decide(trace)


def test_observe_and_record_archive_and_retain(tmp_path, make_png) -> None:
    archive = LocalArchive(tmp_path / "a")
    ctl = MemoryController(
        policy=ImageSensitivePolicy("0" * 64), archive=archive, allocator=RecentAllocator(), budget=1
    )
    trace = Trace("goal", episode_id="ep-7")
    first = ctl.observe(trace, make_png((1, 2, 3)))
    decision = ctl.decide(trace)
    event = ctl.record(trace, decision, make_png((4, 5, 6)), app="Notes")
    assert event.pre_screenshot == first and event.action.text == "0000"
    assert trace.current_screenshot == event.screenshot
    assert "ep-7" in archive.live_episodes()
    report = archive.gc(grace_seconds=0)
    assert report.deleted == 0 and event.screenshot in archive


class PreparingAllocator(RecentAllocator):
    """Recent-B with the optional ``prepare`` hook, recording its calls."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.prepared: list[tuple[object, str]] = []
        self.fail = fail

    def prepare(self, archive, sha256: str) -> None:
        self.prepared.append((archive, sha256))
        if self.fail:
            raise RuntimeError("prefetch pool is gone")


def test_controller_calls_prepare_on_observe_and_record(tmp_path, make_png) -> None:
    archive = LocalArchive(tmp_path / "a")
    allocator = PreparingAllocator()
    ctl = MemoryController(
        policy=ImageSensitivePolicy("0" * 64), archive=archive, allocator=allocator, budget=1
    )
    trace = Trace("goal", episode_id="ep-8")
    first = ctl.observe(trace, make_png((1, 2, 3)))
    event = ctl.record(trace, ctl.decide(trace), make_png((4, 5, 6)))
    again = ctl.observe(trace, event.screenshot)  # an existing hash is prepared too
    assert allocator.prepared == [(archive, first), (archive, event.screenshot), (archive, again)]


def test_failing_prepare_warns_and_the_step_goes_on(tmp_path, make_png) -> None:
    ctl = MemoryController(
        policy=ImageSensitivePolicy("0" * 64),
        archive=LocalArchive(tmp_path / "a"),
        allocator=PreparingAllocator(fail=True),
        budget=1,
    )
    trace = Trace("goal", episode_id="ep-9")
    with pytest.warns(CausalCacheWarning, match="prepare"):
        sha = ctl.observe(trace, make_png((1, 2, 3)))
    assert trace.current_screenshot == sha
