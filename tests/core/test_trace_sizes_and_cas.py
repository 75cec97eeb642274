"""Screen sizes recorded with events, unparsed steps recorded, compare-and-swap on the trace head,
one existence check per step, and the prompt's system-message merge and current-screen dedupe."""

from __future__ import annotations

import io
import json
import threading

import pytest
from PIL import Image

from causalcache_memory.actions.model import Action
from causalcache_memory.allocation.base import make_allocation
from causalcache_memory.allocation.simple import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.errors import TraceConflictError
from causalcache_memory.policy import Generation
from causalcache_memory.render.prompt import (
    SAME_AS_CURRENT,
    RenderOptions,
    merge_system_prompts,
    render_prompt,
)
from causalcache_memory.trace import Event, Trace
from causalcache_memory.trace.store import TraceStore


def _png(i: int, size: tuple[int, int] = (64, 40)) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", size, (i * 7 % 256, 90, 30)).save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


class _Echo:
    name = "echo"

    def __init__(self) -> None:
        self.prompts = []

    def generate(self, prompt):
        self.prompts.append(prompt)
        return Generation(response="click", action=Action("click", x=0.5, y=0.5))


@pytest.fixture
def archive(tmp_path):
    return LocalArchive(tmp_path / "a")


def _controller(archive, policy=None, **kw):
    return MemoryController(
        policy=policy or _Echo(), archive=archive, allocator=RecentAllocator(), budget=2, **kw
    )


def test_controller_records_screen_sizes_and_store_persists_them(archive):
    ctl = _controller(archive)
    trace = Trace("task", episode_id="ep")
    ctl.observe(trace, _png(0, (120, 80)))
    assert trace.current_screen_size == (120, 80)
    event = ctl.record(trace, Action("click", x=0.5, y=0.5), _png(1, (100, 60)))
    assert event.screen_size == (120, 80) and event.screenshot_size == (100, 60)
    assert "(60, 40)" in event.summary  # pixel point on the pre-action screen: 0.5 * (120 - 1)
    store = TraceStore(archive)
    head = store.commit(None, trace)
    cold = TraceStore(archive).load_trace(head)
    assert cold.current_screen_size == (100, 60) and cold.events[0].screenshot_size == (100, 60)


def test_events_without_sizes_load_and_hash_as_before():
    event = Event(1, Action("wait"), "r", "1. wait", "a" * 64)
    data = event.to_dict()
    assert "screenshot_size" not in data  # older records: same canonical JSON, same hash
    assert Event.from_dict(data).screenshot_size is None
    assert Event.from_dict({**data, "screenshot_size": [3, 4]}).screenshot_size == (3, 4)


def test_unparsed_step_is_recorded_with_reply_and_error(archive):
    ctl = _controller(archive)
    trace = Trace("task", episode_id="ep")
    ctl.observe(trace, _png(0))
    event = ctl.record(trace, None, _png(1), response="I will click the thing", parse_error="no action")
    assert len(trace) == 1 and event.unparsed and event.metadata["parse_error"] == "no action"
    assert event.response == "I will click the thing" and "reply not parsed" in event.summary
    assert trace.current_screenshot == event.screenshot


def test_a_string_screenshot_is_read_once_and_a_missing_one_is_refused(archive):
    ctl = _controller(archive)
    trace = Trace("task", episode_id="ep")
    sha = archive.put(_png(3, (30, 20))).sha256
    ctl.observe(trace, sha)
    assert trace.current_screen_size == (30, 20)
    with pytest.raises(Exception, match="cannot be read"):
        ctl.observe(trace, "b" * 64)


def test_commit_is_a_compare_and_swap_per_episode(archive):
    store = TraceStore(archive)
    trace = Trace("task", episode_id="thread-cas")
    trace.observe(archive.put(_png(0)).sha256)
    h1 = store.commit(None, trace)
    first = store.load_trace(h1)
    second = store.load_trace(h1)
    first.record(Action("click", x=0.1, y=0.1), "r1", archive.put(_png(1)).sha256)
    h2 = store.commit(h1, first)
    second.record(Action("click", x=0.9, y=0.9), "r2", archive.put(_png(2)).sha256)
    with pytest.raises(TraceConflictError, match="thread 'thread-cas'"):
        store.commit(h1, second)  # extends a head that is no longer the head
    assert TraceStore(archive).load_trace(h2).events[0].response == "r1"  # nothing lost
    with pytest.raises(TraceConflictError):
        TraceStore(archive).commit(None, Trace("task", episode_id="thread-cas"))  # shared per archive
    store.reset_head("thread-cas")  # deliberate branch (time travel)
    assert store.commit(h1, second) != h2


def test_concurrent_commits_on_one_episode_let_exactly_one_win(archive):
    store = TraceStore(archive)
    trace = Trace("task", episode_id="race")
    trace.observe(archive.put(_png(0)).sha256)
    h0 = store.commit(None, trace)
    shots = [archive.put(_png(10 + i)).sha256 for i in range(8)]
    results: list[object] = []

    def writer(i: int) -> None:
        mine = store.load_trace(h0)
        mine.record(Action("click", x=0.1, y=0.1), f"r{i}", shots[i])
        try:
            results.append(store.commit(h0, mine))
        except TraceConflictError as exc:
            results.append(exc)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    wins = [r for r in results if isinstance(r, str)]
    assert len(wins) == 1 and len(results) == 8 and store.head_of("race") == wins[0]


def test_prompt_images_are_checked_once_per_step(archive):
    class Counting(LocalArchive):
        checks = 0

        def __contains__(self, sha):
            Counting.checks += 1
            return super().__contains__(sha)

    arch = Counting(archive.root)
    ctl = _controller(arch)
    trace = Trace("task", episode_id="ep")
    ctl.observe(trace, _png(0))
    for i in range(3):
        ctl.record(trace, Action("click", x=0.5, y=0.5), _png(i + 1))
    Counting.checks = 0
    ctl.decide(trace)
    ctl.decide(trace)  # a new step checks again, once per image
    assert Counting.checks == 2 * 2  # per step: v_2 and v_3 (= x_t), each checked once


def test_system_prompts_merge_in_documented_order():
    assert (
        merge_system_prompts("You operate my Mac.", "Memory text.") == "You operate my Mac.\n\nMemory text."
    )
    assert merge_system_prompts(None, "M") == "M" and merge_system_prompts("U", "") == "U"
    assert merge_system_prompts("same", "same") == "same"


def test_dedupe_sends_the_current_screen_once_only_when_enabled(archive):
    ctl = _controller(archive)
    trace = Trace("task", episode_id="ep")
    ctl.observe(trace, _png(0))
    for i in range(3):
        ctl.record(trace, Action("click", x=0.5, y=0.5), _png(i + 1))
    alloc = make_allocation([2, 3], t=trace.t, budget=2, allocator="recent")
    plain = render_prompt(trace, alloc)
    deduped = render_prompt(trace, alloc, options=RenderOptions(dedupe_current_screen=True))
    assert len(plain.images) == 3 and len(deduped.images) == 2
    assert [i.event_index for i in deduped.history_images] == [2]
    assert any(SAME_AS_CURRENT in m.text for m in deduped.messages)
    assert deduped.meta["screen_size"] == (64, 40)
    json.dumps(deduped.meta)  # stays JSON-able
