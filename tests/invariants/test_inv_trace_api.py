"""The trace's edges: hash checks, event lookup bounds, serialization defaults and refusals, sizes."""

from __future__ import annotations

import hashlib

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.errors import TraceError
from causalcache_memory.trace import Event, check_sha256


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def two_events() -> Trace:
    trace = Trace("goal", episode_id="ep", platform="mobile")
    trace.observe(sha("x0"), size=(1080, 2400))
    trace.record(Action("back"), "r1", sha("x1"), app="Shop", screenshot_size=(1080, 2400))
    trace.record(Action("home"), "r2", sha("x2"), metadata={"k": 1})
    return trace


@pytest.mark.parametrize("bad", ["", "a" * 63, "a" * 65, "A" * 64, "g" * 64, None, 5, b"a" * 64])
def test_only_lower_case_sha256_hex_is_a_hash(bad) -> None:
    with pytest.raises(TraceError, match=f"pre_screenshot={bad!r} is not a sha256"):
        check_sha256(bad, what="pre_screenshot")
    assert check_sha256("0" * 64) == "0" * 64


def test_event_lookup_is_1_based_and_bounded() -> None:
    trace = two_events()
    assert trace.event(1).summary.startswith("1.") and trace.event(2).index == 2
    for bad in (0, 3, -1):
        with pytest.raises(TraceError, match=f"event index {bad} is outside 1..2"):
            trace.event(bad)
    assert trace.summaries() == [trace.event(1).summary, trace.event(2).summary]
    assert trace.screenshots() == {sha("x0"), sha("x1"), sha("x2")}
    assert Trace("g").screenshots() == set() and len(Trace("g")) == 0 and Trace("g").t == 1


def test_record_refuses_without_appending() -> None:
    trace = two_events()
    before = trace.to_dict()
    with pytest.raises(TraceError, match="action must be an Action, got dict"):
        trace.record({"type": "back"}, "r", sha("x3"))  # type: ignore[arg-type]
    with pytest.raises(TraceError, match="summary of event 3 must be one line"):
        trace.record(Action("back"), "r", sha("x3"), summary="line one\nline two")
    with pytest.raises(TraceError, match="post-action screenshot"):
        trace.record(Action("back"), "r", "x3")
    assert trace.to_dict() == before
    event = trace.record(Action("back"), "r3", sha("x3"), summary="3. given")
    assert event.summary == "3. given" and event.pre_screenshot == sha("x2") and event.platform == "mobile"
    assert event.screen_size is None  # the previous screen's size was not recorded


def test_sizes_are_recorded_and_checked() -> None:
    trace = two_events()
    assert trace.event(1).screen_size == (1080, 2400)  # defaults to the size of the screen acted on
    assert trace.event(1).screenshot_size == (1080, 2400)
    assert trace.event(2).screen_size == (1080, 2400) and trace.event(2).screenshot_size is None
    for bad in ((0, 10), (10, 0), (10,), "ab", (1.5, "x")):
        with pytest.raises(TraceError, match="must be"):
            trace.observe(sha("y"), size=bad)  # type: ignore[arg-type]


def test_round_trip_keeps_everything_and_defaults_are_explicit() -> None:
    trace = two_events()
    data = trace.to_dict()
    assert data["version"] == 1 and data["platform"] == "mobile" and data["current_screenshot"] == sha("x2")
    assert "current_screen_size" not in data  # unknown sizes are omitted, not written as null
    again = Trace.from_dict(data)
    assert again.to_dict() == data and again.t == 3
    minimal = Trace.from_dict({"goal": "g"})
    assert (minimal.episode_id, minimal.platform, minimal.current_screenshot, len(minimal)) == (
        "episode",
        "desktop",
        None,
        0,
    )
    with pytest.raises(TraceError, match="trace format version 2 is not supported"):
        Trace.from_dict({**data, "version": 2})
    with pytest.raises(TraceError, match="goal=' ' must be a non-empty instruction"):
        Trace(" ")


def test_event_records_need_their_fields_and_take_defaults() -> None:
    raw = two_events().event(2).to_dict()
    for field in ("index", "action", "response", "summary", "screenshot"):
        with pytest.raises(TraceError, match=f"missing field '{field}'"):
            Event.from_dict({k: v for k, v in raw.items() if k != field})
    bare = Event.from_dict({k: raw[k] for k in ("index", "action", "response", "summary", "screenshot")})
    assert (bare.platform, bare.pre_screenshot, bare.screen_size, bare.app, dict(bare.metadata)) == (
        "desktop",
        None,
        None,
        None,
        {},
    )
    assert Event.from_dict(raw).metadata == {"k": 1} and Event.from_dict(raw).to_dict() == raw
    with pytest.raises(TraceError, match="pre_screenshot"):
        Event.from_dict({**raw, "pre_screenshot": "nope"})
