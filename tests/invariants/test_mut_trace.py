"""The trace's API contract where the mutation run (docs/mutation/trace.md) found no test: keyword-only
options, immutable slotted events, the ``unparsed`` flag, the 1-pixel lower bound of a size, the
refused format versions, and traces longer than CPython's cache of small ints (-5..256), where ``is``
and ``==`` on indices stop agreeing."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.errors import TraceError
from causalcache_memory.summarize import default_summarizer
from causalcache_memory.trace import Event, check_sha256


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def test_options_are_keyword_only() -> None:
    """``goal``, ``episode_id`` and ``platform`` are all strings, and ``app``/``what`` follow string
    arguments: a positional slip would silently mislabel an episode or an event, so it is a TypeError."""
    with pytest.raises(TypeError):
        Trace("goal", "ep-1")  # type: ignore[misc]
    trace = Trace("goal", episode_id="ep-1")
    with pytest.raises(TypeError):
        trace.observe(sha("x0"), (1080, 2400))  # type: ignore[misc]
    with pytest.raises(TypeError):
        trace.record(Action("back"), "r1", sha("x1"), "Shop")  # type: ignore[misc]
    with pytest.raises(TypeError):
        check_sha256(sha("x"), "pre_screenshot")  # type: ignore[misc]
    with pytest.raises(TypeError):
        Trace.from_dict(trace.to_dict(), default_summarizer)  # type: ignore[misc]
    assert (len(trace), trace.current_screenshot) == (0, None)  # nothing was recorded by the refusals


def test_a_recorded_event_is_immutable_and_slotted() -> None:
    """Events are shared by the trace, the chain cache and every trace loaded from it: rewriting one in
    place would change history behind the archived record's hash. A trace keeps every event of the
    episode in memory, so events carry no per-instance ``__dict__``."""
    trace = Trace("goal")
    event = trace.record(Action("back"), "r1", sha("x1"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.summary = "1. rewritten"  # type: ignore[misc]
    assert not hasattr(event, "__dict__")
    assert trace.event(1).summary == event.summary != "1. rewritten"


def test_unparsed_is_a_flag_read_from_the_metadata() -> None:
    """A step whose reply held no parsable action is flagged ``unparsed`` (a bool, not a method: a bound
    method would make every event look unparsed); the flag survives serialization."""
    trace = Trace("goal")
    parsed = trace.record(Action("back"), "Action: back", sha("x1"))
    garbled = trace.record(
        Action("wait"), "I am not sure", sha("x2"), metadata={"unparsed": True, "parse_error": "no action"}
    )
    assert parsed.unparsed is False and garbled.unparsed is True
    assert Event.from_dict(json.loads(json.dumps(garbled.to_dict()))).unparsed is True


def test_a_one_pixel_dimension_is_a_valid_size() -> None:
    """Sizes must be ``both >= 1``: 1 is the smallest valid width and height (a 1-pixel-high status
    strip is a screen), 0 is not."""
    trace = Trace("goal")
    for size in ((1, 1), (1, 2400), (1080, 1)):
        trace.observe(sha("x0"), size=size)
        assert trace.current_screen_size == size
    event = trace.record(Action("back"), "r1", sha("x1"), screenshot_size=(1, 1))
    assert event.screen_size == (1080, 1) and event.screenshot_size == (1, 1)
    assert Event.from_dict(event.to_dict()).screenshot_size == (1, 1)
    for bad in ((0, 1), (1, 0)):
        with pytest.raises(TraceError, match=r"both >= 1"):
            trace.observe(sha("x2"), size=bad)


def test_only_format_version_1_is_read() -> None:
    """A record of another format version is refused, older ones (0) as well as newer ones (2)."""
    data = Trace("goal").to_dict()
    assert Trace.from_dict({**data, "version": 1}).goal == "goal"
    for version in (0, 2):
        with pytest.raises(TraceError, match=f"trace format version {version} is not supported"):
            Trace.from_dict({**data, "version": version})


def test_a_trace_longer_than_256_events_round_trips() -> None:
    """Episodes have no step limit. Index 257 read back from JSON is a different int object from
    ``len(events) + 1``: appending must compare indices by value."""
    trace = Trace("goal", episode_id="long")
    trace.observe(sha("x0"))
    for i in range(1, 301):
        trace.record(Action("back"), f"r{i}", sha(f"x{i}"), summary=f"{i}. back")
    data = json.loads(json.dumps(trace.to_dict()))
    again = Trace.from_dict(data)
    assert again.to_dict() == data and again.t == 301
    assert Trace.from_events("goal", [Event.from_dict(e) for e in data["events"]]).t == 301
