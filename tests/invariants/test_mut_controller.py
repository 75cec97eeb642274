"""The controller's documented contract, checked where its first mutation run found it untested.

``causalcache_memory/controller.py`` promises (module and method docstrings):

* an executed step whose reply held no parsable action is still recorded: a ``wait`` placeholder, the
  verbatim reply, ``{"unparsed": True, "parse_error": ...}`` and a one-line summary saying so;
* ``StepDecision.to_record()`` is the small JSON record of a decision for stream events and the episode
  log: latencies in milliseconds, the learned selector's facts, prefix-cache reuse per model call;
* every allocator call runs on the controller's own worker thread within ``selector_timeout_s`` (0.25 s
  by default; ``None`` = on the caller's thread), and a failure, a time limit or a stale allocation
  falls back to Recent-B with a :class:`CausalCacheWarning`;
* a screenshot's pixel size is recorded with it; a hash that the archive cannot read is a
  :class:`PromptImageError`, never a step recorded with a missing screenshot.

Background: docs/mutation/controller.md.
"""

from __future__ import annotations

import dataclasses
import threading
import time
import weakref

import pytest
from PIL import Image

from causalcache_memory import Action, Generation, Trace
from causalcache_memory.allocation import Allocation, AllocationContext, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController, StepDecision, unparsed_summary
from causalcache_memory.errors import BlobNotFoundError, CausalCacheWarning, PromptImageError
from causalcache_memory.render.prompt import RenderOptions

SHOT_SIZE = (64, 48)  # tests/conftest.py::png_bytes default: not square, so width and height differ


# ---------------------------------------------------------------------------------------------- helpers
class ScriptedPolicy:
    """Returns ``replies`` in turn (the last one repeatedly); records each prompt it was given."""

    name = "scripted"

    def __init__(self, *replies: Generation, sleep_s: float = 0.0) -> None:
        self.replies = list(replies) or [Generation("Action: back", Action("back"))]
        self.sleep_s = sleep_s
        self.prompts: list = []

    def generate(self, prompt) -> Generation:
        self.prompts.append(prompt)
        if self.sleep_s:
            time.sleep(self.sleep_s)
        return self.replies[min(len(self.prompts), len(self.replies)) - 1]

    @property
    def calls(self) -> list[tuple[int | None, ...]]:
        return [tuple(i.event_index for i in p.images) for p in self.prompts]


class SetAllocator:
    """Returns ``Allocation(selected)`` for ``t + t_offset`` as is (the controller must check it)."""

    name = "set"

    def __init__(self, selected, *, uses_witness=True, t_offset=0, sleep_s=0.0, error=None) -> None:
        self.selected, self.uses_witness, self.t_offset = tuple(selected), uses_witness, t_offset
        self.sleep_s, self.error = sleep_s, error

    def allocate(self, ctx: AllocationContext) -> Allocation:
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.error is not None:
            raise self.error
        return Allocation(self.selected, ctx.t + self.t_offset, ctx.budget, self.name)


class HungAllocator:
    """Blocks in ``allocate`` until released (a stalled scorer); remembers the thread it ran on."""

    name = "hung"
    uses_witness = False

    def __init__(self) -> None:
        self.release = threading.Event()
        self.threads: list[threading.Thread] = []

    def allocate(self, ctx: AllocationContext) -> Allocation:
        self.threads.append(threading.current_thread())
        self.release.wait(10.0)
        return RecentAllocator().allocate(ctx)


def history(archive: LocalArchive, png, steps: int, *, episode_id: str = "ep") -> Trace:
    """A trace at ``t = steps + 1`` whose events have distinct archived screenshots."""
    trace = Trace("Send the code to Alice", episode_id=episode_id)
    trace.observe(archive.put(png((0, 0, 0))).sha256)
    for i in range(1, steps + 1):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", archive.put(png((i * 20 % 256, i, 0))).sha256)
    return trace


@pytest.fixture
def archive(tmp_path) -> LocalArchive:
    return LocalArchive(tmp_path / "archive")


def controller(archive, policy=None, allocator=None, **kwargs) -> MemoryController:
    return MemoryController(
        policy=policy or ScriptedPolicy(),
        archive=archive,
        allocator=allocator or RecentAllocator(),
        budget=kwargs.pop("budget", 4),
        **kwargs,
    )


# ------------------------------------------------------------------------ unparsed replies (record)
@pytest.mark.parametrize(
    ("response", "app", "expected"),
    [
        ("ok", None, "3. (reply not parsed) 'ok'"),
        ("ok", "Notes", "3. (reply not parsed) 'ok' [Notes]"),
        # whitespace (newlines included) collapses: the summary is one line of the rendered history
        ("  I will\n  scroll\tdown ", None, "3. (reply not parsed) 'I will scroll down'"),
        ("x" * 60, None, "3. (reply not parsed) '" + "x" * 60 + "'"),  # 60 characters fit as they are
        ("x" * 61, None, "3. (reply not parsed) '" + "x" * 59 + "…'"),  # 61: 59 kept + the ellipsis
        ("y" * 200, "Mail", "3. (reply not parsed) '" + "y" * 59 + "…' [Mail]"),
        ("", None, "3. (reply not parsed)"),  # nothing to quote: no empty quotes
        (" \n ", "Notes", "3. (reply not parsed) [Notes]"),
    ],
)
def test_unparsed_summary_is_one_line_of_at_most_60_reply_characters(response, app, expected) -> None:
    """The history shows every step as one short line, so a long or multi-line reply is clipped."""
    assert unparsed_summary(3, response, app) == expected


def test_the_clip_keeps_exactly_60_characters_with_the_ellipsis_last() -> None:
    text = "".join(chr(ord("a") + i % 26) for i in range(61))  # no repeated runs: the cut point shows
    quoted = unparsed_summary(1, text).removeprefix("1. (reply not parsed) ")
    assert quoted == "'abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyzabcdefg…'"
    assert len(quoted) == 60 + 2


@pytest.fixture
def two_steps(archive, make_png) -> Trace:
    return history(archive, make_png, 2)


def test_an_unparsed_decision_is_recorded_with_its_verbatim_reply(archive, make_png, two_steps) -> None:
    """No executed step is missing from the trace, even when the reply held no action (record())."""
    reply = Generation("I think we should\nscroll", None, parse_error="no 'Action:' line")
    ctl = controller(archive, ScriptedPolicy(reply), budget=1)
    decision = ctl.decide(two_steps)
    event = ctl.record(two_steps, decision, make_png((9, 9, 9)), app="Notes")
    assert event.index == 3 and event.action == Action("wait") and event.unparsed
    assert event.response == "I think we should\nscroll"  # verbatim, as the decision's reply
    assert dict(event.metadata) == {"unparsed": True, "parse_error": "no 'Action:' line"}
    assert event.summary == "3. (reply not parsed) 'I think we should scroll' [Notes]"
    assert two_steps.summaries()[-1] == event.summary


def test_record_arguments_override_the_decision(archive, make_png, two_steps) -> None:
    """An explicit ``response``/``parse_error`` wins; the decision fills in only what is not given."""
    reply = Generation("garbled", None, parse_error="bad json")
    ctl = controller(archive, ScriptedPolicy(reply), budget=1)
    decision = ctl.decide(two_steps)
    event = ctl.record(two_steps, decision, make_png((9, 9, 9)), response="edited", parse_error="mine")
    assert event.response == "edited" and event.metadata["parse_error"] == "mine"
    assert event.summary == "3. (reply not parsed) 'edited'"


def test_an_executed_step_without_any_action_gets_the_default_parse_error(
    archive, make_png, two_steps
) -> None:
    ctl = controller(archive, budget=1)
    event = ctl.record(two_steps, None, make_png((9, 9, 9)))
    assert event.action == Action("wait") and event.response == ""
    assert dict(event.metadata) == {"unparsed": True, "parse_error": "no action found in the reply"}
    assert event.summary == "3. (reply not parsed)"


def test_a_parsed_decision_is_recorded_with_its_action_and_reply(archive, make_png, two_steps) -> None:
    reply = Generation("Action: type A7K2", Action("type", text="A7K2"))
    ctl = controller(archive, ScriptedPolicy(reply), budget=1)
    event = ctl.record(two_steps, ctl.decide(two_steps), make_png((9, 9, 9)), metadata={"k": 1})
    assert event.action == Action("type", text="A7K2") and event.response == "Action: type A7K2"
    assert dict(event.metadata) == {"k": 1} and not event.unparsed


# ------------------------------------------------------------------------- StepDecision.to_record()
def _allocation(selected=(2, 6, 7, 8), t=9, **info) -> Allocation:
    return Allocation(tuple(selected), t, len(selected), "set", info=info)


def test_latencies_are_logged_in_milliseconds_rounded_to_the_microsecond() -> None:
    decision = StepDecision(
        t=9,
        generation=Generation("Action: back", Action("back")),
        allocation=_allocation(),
        pass_latency_s=(0.0123456, 0.5),
        selector_latency_s=0.0234567,
    )
    record = decision.to_record()
    assert record["pass_latency_ms"] == [12.346, 500.0]
    assert record["selector_latency_ms"] == 23.457


def test_a_decision_built_without_a_selector_call_logs_zero_selector_time() -> None:
    """A hand-built decision (a replay, a harness) records no pass and no selector time, not a guess."""
    record = StepDecision(t=9, generation=Generation("?", None), allocation=_allocation()).to_record()
    assert record["pass_latency_ms"] == [] and record["selector_latency_ms"] == 0.0
    assert record["action"] is None and record["fallback"] is None and "proposal" not in record


def test_the_record_carries_the_action_and_the_learned_selector_facts() -> None:
    allocation = _allocation(predicted_gain=0.31, min_gain=0.05, ood_distance=1.7, other="not logged")
    generation = Generation("Action: type 1", Action("type", text="1"))
    record = StepDecision(t=9, generation=generation, allocation=allocation).to_record()
    assert record["action"] == {"type": "type", "text": "1"}
    assert {k: record[k] for k in ("predicted_gain", "min_gain", "ood_distance")} == {
        "predicted_gain": 0.31,
        "min_gain": 0.05,
        "ood_distance": 1.7,
    }
    assert "other" not in record
    plain = StepDecision(t=9, generation=generation, allocation=_allocation()).to_record()
    assert not {"predicted_gain", "min_gain", "ood_distance"} & set(plain)


def _gen(cached: int | None, prompt_tokens: int | None = None) -> Generation:
    meta = {} if prompt_tokens is None else {"prompt_tokens": prompt_tokens}
    return Generation("Action: back", Action("back"), meta=meta, cached_tokens=cached)


def test_prefix_cache_reuse_is_logged_per_model_call() -> None:
    """One entry per model call actually made: pass 1 then pass 2, or the single call."""
    a1, a2 = _gen(100, 400), _gen(120, 410)
    two = StepDecision(9, a2, _allocation(), proposal=a1, second_pass=True).to_record()
    assert two["cached_tokens"] == [100, 120] and two["prompt_tokens"] == [400, 410]
    # two passes planned, pass 2 not needed: the proposal *is* the emitted generation, one call
    kept = StepDecision(9, a1, _allocation(), proposal=a1).to_record()
    assert kept["cached_tokens"] == [100] and kept["prompt_tokens"] == [400]
    single = StepDecision(9, _gen(7), _allocation()).to_record()
    assert single["cached_tokens"] == [7] and single["prompt_tokens"] == [None]
    # a runtime that reports no cache use: no cache fields at all
    quiet = StepDecision(9, _gen(None), _allocation(), proposal=_gen(None), second_pass=True)
    assert "cached_tokens" not in quiet.to_record() and "prompt_tokens" not in quiet.to_record()


def test_a_decision_cannot_be_altered_after_the_fact(archive, make_png, two_steps) -> None:
    """The decision is logged and streamed as made: its fields are read-only."""
    decision = controller(archive, budget=1).decide(two_steps)
    with pytest.raises(dataclasses.FrozenInstanceError):
        decision.fallback = "edited later"  # type: ignore[misc]


# -------------------------------------------------------------------------------------- the API
def test_controller_options_and_record_extras_are_keyword_only(archive, make_png, two_steps) -> None:
    """Positional options could silently bind a budget to ``two_pass`` or a reply to ``app``."""
    with pytest.raises(TypeError):
        MemoryController(ScriptedPolicy(), archive, RecentAllocator(), 4)  # type: ignore[misc]
    ctl = controller(archive, budget=1)
    with pytest.raises(TypeError):
        ctl.record(two_steps, None, make_png((9, 9, 9)), "reply")  # type: ignore[misc]
    assert len(two_steps) == 2  # nothing was recorded


def test_custom_render_options_reach_the_policy(archive, two_steps) -> None:
    policy = ScriptedPolicy()
    options = RenderOptions(system_prompt="You operate a phone.", request="Next action, please.")
    controller(archive, policy, budget=1, render_options=options).decide(two_steps)
    texts = [m.text for m in policy.prompts[0].messages]
    assert texts[0] == "You operate a phone." and texts[-1].endswith("Next action, please.")


# -------------------------------------------------------------------------- screenshots and sizes
def test_pil_screenshots_record_their_pixel_size(archive, two_steps) -> None:
    ctl = controller(archive, budget=1)
    ctl.observe(two_steps, Image.new("RGB", (64, 48), (1, 2, 3)))
    assert two_steps.current_screen_size == (64, 48)
    event = ctl.record(two_steps, None, Image.new("RGB", (30, 20), (4, 5, 6)))
    assert event.screen_size == (64, 48) and event.screenshot_size == (30, 20)


def test_encoded_screenshots_record_their_pixel_size(archive, make_png, two_steps) -> None:
    ctl = controller(archive, budget=1)
    ctl.observe(two_steps, make_png((1, 2, 3), size=(40, 24)))
    assert two_steps.current_screen_size == (40, 24)


def test_an_archived_hash_is_read_once_for_its_size(archive, make_png, two_steps) -> None:
    """A hash archived elsewhere (another process, a previous run) is checked and sized on first use."""
    sha = archive.put(make_png((7, 7, 7))).sha256
    ctl = controller(archive, budget=1)
    assert ctl.observe(two_steps, sha) == sha
    assert two_steps.current_screen_size == SHOT_SIZE


def test_a_hash_missing_from_the_archive_is_a_prompt_image_error(archive, two_steps) -> None:
    missing = "ab" * 32
    ctl = controller(archive, budget=1)
    before = two_steps.current_screenshot
    with pytest.raises(PromptImageError, match=f"screenshot {missing} cannot be read") as info:
        ctl.observe(two_steps, missing)
    assert isinstance(info.value.__cause__, BlobNotFoundError)
    with pytest.raises(PromptImageError):
        ctl.record(two_steps, None, missing)
    assert two_steps.current_screenshot == before and len(two_steps) == 2  # nothing half-recorded


# ------------------------------------------------------------------------- the prepare() hook
class Preparing(RecentAllocator):
    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail
        self.threads: list[threading.Thread] = []

    def prepare(self, archive, sha256: str) -> None:
        self.threads.append(threading.current_thread())
        if self.fail:
            raise RuntimeError("prefetch pool is gone")


@pytest.mark.parametrize("timeout", [None, 5.0])
def test_prepare_runs_on_the_worker_unless_the_limit_is_none(archive, make_png, two_steps, timeout) -> None:
    """``selector_timeout_s=None`` = on the caller's thread; otherwise on the controller's own worker."""
    allocator = Preparing()
    with controller(archive, allocator=allocator, budget=1, selector_timeout_s=timeout) as ctl:
        ctl.observe(two_steps, make_png((1, 2, 3)))
    on_caller = [t is threading.current_thread() for t in allocator.threads]
    assert on_caller == [timeout is None]


def test_a_failing_prepare_warns_at_the_callers_line(archive, make_png, two_steps) -> None:
    """The warning points at the user's ``observe``/``record`` call, not inside the controller."""
    ctl = controller(archive, allocator=Preparing(fail=True), budget=1, selector_timeout_s=None)
    with pytest.warns(CausalCacheWarning, match="prepare") as observed:
        ctl.observe(two_steps, make_png((1, 2, 3)))
    with pytest.warns(CausalCacheWarning, match="prepare") as recorded:
        ctl.record(two_steps, None, make_png((4, 5, 6)))
    assert [w.filename for w in (*observed, *recorded)] == [__file__, __file__]


# -------------------------------------------------------------------------- allocator time limits
def test_the_default_limit_bounds_a_hung_allocator_to_a_quarter_second(archive, two_steps) -> None:
    allocator = HungAllocator()
    ctl = controller(archive, allocator=allocator, budget=1)
    start = time.perf_counter()
    try:
        with pytest.warns(CausalCacheWarning, match="exceeded 250 ms; falling back to Recent-B"):
            decision = ctl.decide(two_steps)
        elapsed = time.perf_counter() - start
    finally:
        allocator.release.set()
        ctl.close()
    assert 0.25 <= elapsed < 1.0 and decision.allocation.selected == (2,)
    assert decision.fallback == "allocator 'hung' exceeded 250 ms"


@pytest.mark.parametrize(("limit_s", "shown"), [(0.01249, "12 ms"), (0.01251, "13 ms")])
def test_a_time_limit_fallback_names_the_limit_in_whole_milliseconds(archive, two_steps, limit_s, shown):
    """The reason (logged per step) gives the configured limit rounded to the nearest millisecond."""
    allocator = HungAllocator()
    ctl = controller(archive, allocator=allocator, budget=1, selector_timeout_s=limit_s)
    try:
        with pytest.warns(CausalCacheWarning):
            decision = ctl.decide(two_steps)
    finally:
        allocator.release.set()
        ctl.close()
    assert decision.fallback == f"allocator 'hung' exceeded {shown}"


def test_a_dropped_controller_abandons_its_hung_worker_at_once(archive, two_steps) -> None:
    """Garbage collection of a controller must not wait on a hung allocator (``weakref.finalize``)."""
    allocator = HungAllocator()
    # 250 ms, not 10: under load (the suite runs at load average 20 too) a 10 ms limit can pass before
    # the worker thread even starts, and a call that never started is cancelled, not hung
    ctl = controller(archive, allocator=allocator, budget=1, selector_timeout_s=0.25)
    with pytest.warns(CausalCacheWarning, match="exceeded"):
        ctl.decide(two_steps)
    assert allocator.threads, "the allocator never started: nothing hung to abandon"
    alive = weakref.ref(ctl)
    start = time.perf_counter()
    del ctl  # the last reference: collected (and finalized) right here
    dropped_s = time.perf_counter() - start
    allocator.release.set()
    (worker,) = allocator.threads
    worker.join(5.0)
    assert alive() is None and dropped_s < 0.5  # close(1.0) would wait a full second on the hung call
    assert not worker.is_alive()  # the finalizer did close it: the freed thread found the stop signal


# -------------------------------------------------------------------------------------- latencies
def test_latencies_are_the_measured_wall_time_of_each_call(archive, two_steps) -> None:
    """Pass and selector latencies are durations: at least the work done, at most the whole step."""
    policy = ScriptedPolicy(sleep_s=0.01)
    allocator = SetAllocator((1,), sleep_s=0.01)  # not Recent-1 = (2,): pass 2 runs
    with controller(archive, policy, allocator, budget=1) as ctl:
        start = time.perf_counter()
        decision = ctl.decide(two_steps)
        step_s = time.perf_counter() - start
    assert decision.second_pass and len(decision.pass_latency_s) == 2
    assert all(0.01 <= s <= step_s for s in (*decision.pass_latency_s, decision.selector_latency_s))
    assert sum(decision.pass_latency_s) + decision.selector_latency_s <= step_s


def test_a_fallback_reports_the_time_lost_in_the_failed_allocator(archive, two_steps) -> None:
    allocator = SetAllocator((1,), uses_witness=False, sleep_s=0.01, error=RuntimeError("scorer died"))
    with controller(archive, allocator=allocator, budget=1) as ctl:
        start = time.perf_counter()
        with pytest.warns(CausalCacheWarning, match="scorer died"):
            decision = ctl.decide(two_steps)
        step_s = time.perf_counter() - start
    assert decision.allocation.selected == (2,)
    assert 0.01 <= decision.selector_latency_s <= step_s


# -------------------------------------------------------------------------------- exact-B checks
def test_a_valid_allocation_late_in_a_long_episode_is_used(archive, make_png) -> None:
    """Decision indices past 256 are compared by value (CPython caches small ints only up to 256)."""
    trace = Trace("goal", episode_id="long")
    shot = archive.put(make_png((1, 1, 1))).sha256
    trace.observe(shot)
    for i in range(300):
        trace.record(Action("back"), f"r{i}", shot)
    policy = ScriptedPolicy()
    allocator = SetAllocator((2, 298, 299, 300), uses_witness=False)
    with controller(archive, policy, allocator) as ctl:
        decision = ctl.decide(trace)  # filterwarnings = error: a fallback warning fails here
    assert decision.t == 301 and decision.fallback is None
    assert decision.allocation.selected == (2, 298, 299, 300) and policy.calls == [(2, 298, 299, 300, None)]


# ------------------------------------------- bugs found by the mutation triage (fixed in controller.py)
def test_the_fallback_warning_points_at_the_callers_decide_line(archive, two_steps) -> None:
    ctl = controller(archive, allocator=SetAllocator((), uses_witness=False, error=RuntimeError("x")))
    with pytest.warns(CausalCacheWarning, match="falling back") as caught:
        ctl.decide(two_steps)
    ctl.close()
    assert caught[0].filename == __file__


def test_recent_b_in_another_order_is_recent_b_no_second_model_call(archive, make_png) -> None:
    """Paper, Figure 2b: if S* = Recent-B (a set), a_1 is emitted with no extra model call."""
    trace = history(archive, make_png, 8)  # t = 9, Recent-4 = {5, 6, 7, 8}
    policy = ScriptedPolicy()
    with controller(archive, policy, SetAllocator((8, 5, 6, 7))) as ctl:
        decision = ctl.decide(trace)
    assert policy.calls == [(5, 6, 7, 8, None)] and not decision.second_pass


def test_an_unsorted_allocation_is_decided_and_rendered_in_history_order(archive, make_png) -> None:
    trace = history(archive, make_png, 8)
    policy = ScriptedPolicy()
    with controller(archive, policy, SetAllocator((8, 2, 6, 7), uses_witness=False)) as ctl:
        decision = ctl.decide(trace)
    assert decision.allocation.selected == (2, 6, 7, 8)
    assert policy.calls == [(2, 6, 7, 8, None)]
