"""Trace invariants: append-only with contiguous indices, in memory and in a chain loaded from an archive.

Every case here fails when the matching planted bug of docs/TESTING.md is applied (``Trace.append``
accepting a repeated or backward index; the index check in ``trace.chain.decode_node`` removed; record
hashes not verified on read).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.archive import LocalArchive
from causalcache_memory.errors import TraceError
from causalcache_memory.trace import Event
from causalcache_memory.trace.store import TraceStore


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


def build(n: int, episode_id: str = "ep-1") -> Trace:
    trace = Trace("Send the code to Alice", episode_id=episode_id)
    trace.observe(sha("x0"))
    for i in range(1, n + 1):
        trace.record(Action("click", x=0.1 * i, y=0.5), f"r{i}", sha(f"x{i}"))
    return trace


@pytest.mark.parametrize("index", [1, 2, 3, 5])  # repeated (3), backward (1, 2), gap (5)
def test_append_accepts_only_the_next_index(index: int) -> None:
    trace = build(3)
    before = trace.to_dict()
    template = build(5).event(index)
    with pytest.raises(TraceError, match=f"expected event 4, got {index}"):
        trace.append(template)
    assert trace.to_dict() == before  # nothing appended, current screen unchanged
    assert trace.append(build(4).event(4)).index == 4  # the next index is accepted


@pytest.mark.parametrize("indices", [[1, 1], [1, 2, 2], [2, 1], [1, 3]])
def test_events_that_are_not_1_to_n_refuse_to_build_a_trace(indices: list[int]) -> None:
    pool = build(3)
    events = [pool.event(i) for i in indices]
    with pytest.raises(TraceError, match="contiguous"):
        Trace.from_events("g", events)
    data = pool.to_dict()
    data["events"] = [e.to_dict() for e in events]
    with pytest.raises(TraceError, match="contiguous"):
        Trace.from_dict(data)


def _put_node(archive: LocalArchive, parent: str, event: Event | None, log: list | None = None) -> str:
    node = {
        "v": 1,
        "parent": parent,
        "event": event.to_dict() if event is not None else None,
        "current": event.screenshot if event is not None else None,
        "log": log or [],
    }
    return archive.put_record(json.dumps(node, sort_keys=True).encode())


@pytest.mark.parametrize("second", [3, 1, 2])  # skipped, repeated, and a jump after a gap-free start
def test_a_chain_with_a_non_contiguous_index_refuses_to_load(tmp_path, second: int) -> None:
    """A chain written by hand (or by an older buggy writer) whose indices are not 1, 2, ... is refused
    by every reader, not only by ``load_trace`` (which would also trip over ``Trace.append``)."""
    archive = LocalArchive(tmp_path / "a")
    store = TraceStore(archive)
    pool = build(3)
    head = store.append(None, episode={"goal": "g", "episode_id": "ep-1", "platform": "desktop"})
    head = store.append(head, event=pool.event(1))
    if second == 2:  # 1, 2 then 2 again
        head = store.append(head, event=pool.event(2))
    bad = _put_node(archive, head, pool.event(second), log=[{"t": 9}])
    expected = 3 if second == 2 else 2
    for read in ("heads", "load_log", "load_trace"):
        cold = TraceStore(archive)  # nothing cached: the chain is decoded from the archive
        with pytest.raises(
            TraceError, match=rf"trace record {bad} .* holds event {second}, expected {expected}"
        ):
            getattr(cold, read)(bad, episode_id="ep-1")


def test_a_chain_of_contiguous_nodes_written_by_hand_loads(tmp_path) -> None:
    """The control case for the test above: the same hand-written nodes with the right index load."""
    archive = LocalArchive(tmp_path / "a")
    store = TraceStore(archive)
    pool = build(2)
    head = store.append(None, episode={"goal": "g", "episode_id": "ep-1", "platform": "desktop"})
    head = _put_node(archive, head, pool.event(1))
    head = _put_node(archive, head, pool.event(2), log=[{"t": 2}])
    cold = TraceStore(archive)
    assert [e.index for e in cold.load_trace(head)] == [1, 2]
    assert cold.load_log(head) == [{"t": 2}]


def test_a_byte_flipped_valid_record_is_refused_by_the_trace_store(tmp_path) -> None:
    """The damaged record is still a well-formed chain node: only the hash check can notice."""
    archive = LocalArchive(tmp_path / "a")
    store = TraceStore(archive)
    trace = build(2)
    head = store.commit(None, trace, [{"t": 1, "selected": [1]}])
    victim = store.heads(head)[-1]
    path = archive.root / f"records/{victim[:2]}/{victim}"
    raw = path.read_bytes()
    assert raw.count(b'"t":1') == 1
    path.write_bytes(raw.replace(b'"t":1', b'"t":7'))
    json.loads(path.read_bytes())  # still JSON: the format check alone would accept it
    with pytest.raises(TraceError, match=rf"trace record {victim} .*corrupt"):
        TraceStore(archive).load_log(head, episode_id="ep-1")
