"""Every malformed chain node is refused with the record named; the LRU cache keeps at most cache_size
decoded heads; a writer cannot append an event out of order or commit a trace behind its head."""

from __future__ import annotations

import hashlib
import json

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import TraceError
from causalcache_memory.trace.store import TraceStore

EPISODE = {"goal": "g", "episode_id": "ep-1", "platform": "desktop"}


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


@pytest.fixture
def archive(tmp_path) -> LocalArchive:
    return LocalArchive(tmp_path / "a")


def put(archive, node) -> str:
    raw = node if isinstance(node, bytes) else json.dumps(node, sort_keys=True).encode()
    return archive.put_record(raw)


def root(**extra) -> dict:
    return {
        "v": 1,
        "parent": None,
        "episode": dict(EPISODE),
        "event": None,
        "current": None,
        "log": [],
        **extra,
    }


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (b"not json", "is not JSON"),
        (b"[1, 2]", "is not a version-1 chain node"),
        ({**root(), "v": 2}, r"is not a version-1 chain node \(v=2\)"),
        ({k: v for k, v in root().items() if k != "v"}, r"is not a version-1 chain node \(v=None\)"),
        ({**root(), "episode": None}, "is a chain root without episode metadata"),
        (
            {**root(), "episode": {"goal": "g", "platform": "desktop"}},
            "is a chain root without episode metadata",
        ),
        (root(current="ABC"), "current screenshot in trace record"),
        (root(log={"t": 1}), "'log' must be a list of objects"),
        (root(log=[{"t": 1}, 2]), "'log' must be a list of objects"),
        ({**root(), "parent": "../" + "a" * 61}, "parent of trace record"),
    ],
)
def test_a_malformed_node_is_refused_with_its_record_named(archive, node, message) -> None:
    head = put(archive, node)
    with pytest.raises(TraceError, match=message) as info:
        TraceStore(archive).load_log(head, episode_id="ep-1")
    assert head in str(info.value)


def test_a_well_formed_root_written_by_hand_loads(archive) -> None:
    head = put(archive, root(current=sha("x"), log=[{"t": 1}]))
    trace = TraceStore(archive).load_trace(head)
    assert (trace.goal, trace.episode_id, trace.platform) == ("g", "ep-1", "desktop")
    assert trace.current_screenshot == sha("x") and len(trace) == 0
    assert TraceStore(archive).load_log(head) == [{"t": 1}]


def test_a_bad_head_is_refused_before_any_read(archive) -> None:
    store = TraceStore(archive)
    for bad in ("", "abc", "A" * 64, None):
        with pytest.raises(TraceError, match="trace chain head"):
            store.load_trace(bad)  # type: ignore[arg-type]


def test_the_cache_keeps_at_most_cache_size_heads_least_recently_used_first(archive) -> None:
    with pytest.raises(ValueError, match="cache_size=0 must be >= 1"):
        TraceStore(archive, cache_size=0)
    store = TraceStore(archive, cache_size=2)
    heads = [store.append(None, episode={**EPISODE, "episode_id": f"ep-{i}"}) for i in range(3)]
    assert [store.cached(h) for h in heads] == [False, True, True]
    store.load_log(heads[1])  # touch: heads[2] is now the least recently used
    store.load_log(heads[0])  # read back from the archive, evicts heads[2]
    assert [store.cached(h) for h in heads] == [True, True, False]
    store.clear_cache()
    assert not any(store.cached(h) for h in heads)


def test_a_writer_cannot_append_out_of_order_or_commit_behind_its_head(archive) -> None:
    store = TraceStore(archive)
    trace = Trace("g", episode_id="ep-1")
    trace.observe(sha("x0"))
    for i in (1, 2):
        trace.record(Action("back"), f"r{i}", sha(f"x{i}"))
    head = store.append(None, episode=EPISODE)
    with pytest.raises(TraceError, match="has 0 events; cannot append event 2"):
        store.append(head, event=trace.event(2))
    head = store.append(head, event=trace.event(1))
    with pytest.raises(TraceError, match="has 1 events; cannot append event 1"):
        store.append(head, event=trace.event(1))
    head = store.append(head, event=trace.event(2))
    behind = Trace("g", episode_id="ep-1")
    with pytest.raises(TraceError, match=r"has 0 events but its chain head .* has 2"):
        store.commit(head, behind)
    assert [e.index for e in TraceStore(archive).load_trace(head)] == [1, 2]
    assert store.load_trace(head).current_screenshot == sha("x2")  # current defaults to the event's screen
