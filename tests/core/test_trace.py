"""Event trace: append-only, contiguous, summaries from actions, JSON round trip."""

from __future__ import annotations

import hashlib
import json

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.errors import TraceError
from causalcache_memory.summarize import default_summarizer, instruction_summarizer


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def build(n: int) -> Trace:
    trace = Trace("Send the order number to Alice", episode_id="ep-1", platform="mobile")
    trace.observe(sha("x1"))
    for i in range(n):
        trace.record(
            Action("click", x=0.2, y=0.05 * (i + 1), target=f"Item {i}"),
            f"Thought: step {i}\nAction: click",
            sha(f"x{i + 2}"),
            app="Shop",
            screen_size=(1080, 2400),
        )
    return trace


def test_indices_are_contiguous_and_t_is_next_decision() -> None:
    trace = build(5)
    assert [e.index for e in trace] == [1, 2, 3, 4, 5]
    assert trace.t == 6
    assert trace.current_screenshot == sha("x6")
    assert trace.event(3).pre_screenshot == sha("x3")
    assert trace.event(3).screenshot == sha("x4")


def test_default_summary_format() -> None:
    action = Action("click", x=412 / 1919, y=88 / 1079, target="Orders")
    line = default_summarizer(7, action, app="Shop", screen_size=(1920, 1080))
    assert line == '7. click (412, 88) "Orders" [Shop]'
    typed = default_summarizer(2, Action("type", text="hello   world\n"), app="Messages")
    assert typed == '2. type "hello world" [Messages]'


def test_instruction_summarizer_uses_the_dataset_instruction() -> None:
    trace = Trace("goal", summarizer=instruction_summarizer)
    trace.observe(sha("a"))
    ev = trace.record(Action("back"), "r", sha("b"), instruction="Go back to the list", app="Files")
    assert ev.summary == "1. Go back to the list [Files]"
    ev2 = trace.record(Action("home"), "r", sha("c"))
    assert ev2.summary == "2. home"


def test_append_only_rejects_gaps_and_bad_hashes() -> None:
    trace = build(2)
    event = build(4).event(4)
    with pytest.raises(TraceError, match="expected event 3"):
        trace.append(event)
    with pytest.raises(TraceError, match="sha256"):
        trace.record(Action("back"), "r", "../etc/passwd")
    assert len(trace) == 2  # nothing was appended by the failed calls


def test_multiline_summary_rejected() -> None:
    trace = build(0)
    with pytest.raises(TraceError, match="one line"):
        trace.record(Action("back"), "r", sha("z"), summary="a\nb")


def test_json_round_trip_is_lossless() -> None:
    trace = build(4)
    data = json.loads(json.dumps(trace.to_dict()))
    again = Trace.from_dict(data)
    assert again.to_dict() == trace.to_dict()
    assert again.events == trace.events


def test_screenshots_collects_every_reference() -> None:
    trace = build(3)
    assert trace.screenshots() == {sha(f"x{i}") for i in range(1, 5)}


def test_empty_goal_rejected() -> None:
    with pytest.raises(TraceError, match="goal"):
        Trace("  ")


def test_an_empty_trace_is_truthy() -> None:
    trace = Trace("goal")
    assert len(trace) == 0 and bool(trace)
