"""TraceStore and chain-node contract where the mutation run (docs/mutation/trace_store.md,
trace_chain.md) found no test: the compare-and-swap per archive and episode, the no-op commit, one node
per event with the log on the last, the defaults of ``current`` and its size, the LRU cache bounds, the
canonical record bytes, refused records, and chains longer than CPython's cache of small ints."""

from __future__ import annotations

import dataclasses
import hashlib
import json

import pytest

from causalcache_memory import Action, Trace
from causalcache_memory.errors import BlobNotFoundError, TraceConflictError, TraceError
from causalcache_memory.trace.chain import decode_node
from causalcache_memory.trace.store import TraceStore


def sha(s: str) -> str:
    return hashlib.sha256(s.encode()).hexdigest()


class RecordArchive:
    """The record side of the archive protocol in a dict, counting reads (fast enough for long chains)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.records: dict[str, bytes] = {}
        self.retained: dict[str, set[str]] = {}
        self.reads = 0

    def put_record(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        self.records[digest] = data
        return digest

    def get_record(self, sha256: str) -> bytes:
        self.reads += 1
        if sha256 not in self.records:
            raise BlobNotFoundError(f"record {sha256} is not in {self.url}")
        return self.records[sha256]

    def retain(self, episode_id: str, hashes) -> None:
        self.retained.setdefault(episode_id, set()).update(hashes)


@pytest.fixture
def archive(request) -> RecordArchive:
    return RecordArchive(f"memory://{request.node.name}")  # remembered heads are per archive url


@pytest.fixture
def episode_id(request) -> str:
    """An episode id of this test only (remembered heads are process-wide, keyed by archive and episode)."""
    return f"ep-{request.node.name}"


def root(episode_id: str = "ep-1", **extra) -> dict:
    episode = {"goal": "g", "episode_id": episode_id, "platform": "desktop"}
    return {"v": 1, "parent": None, "episode": episode, "event": None, "current": None, "log": [], **extra}


def put(archive: RecordArchive, node: dict) -> str:
    return archive.put_record(json.dumps(node, sort_keys=True).encode())


def started(episode_id: str, steps: int = 0) -> Trace:
    trace = Trace("Send the code to Alice", episode_id=episode_id)
    trace.observe(sha("x0"), size=(1080, 2400))
    for i in range(1, steps + 1):
        trace.record(Action("back"), f"r{i}", sha(f"x{i}"), summary=f"{i}. back")
    return trace


def same_text(s: str) -> str:
    """An equal string that is a different object (as read back from a checkpoint's JSON)."""
    copy = json.loads(json.dumps(s))
    assert copy == s and copy is not s
    return copy


# ---------------------------------------------------------------------- compare-and-swap
def test_a_commit_from_any_other_head_is_a_conflict_naming_both_heads(archive, episode_id) -> None:
    """One writer per episode: whichever way the two hashes sort, extending a head that is not the
    remembered one raises, with both heads abbreviated to 12 hex characters, and writes nothing."""
    store = TraceStore(archive)
    trace = started(episode_id)
    heads = [store.commit(None, trace)]
    for i in (1, 2):
        trace.record(Action("back"), f"r{i}", sha(f"x{i}"))
        heads.append(store.commit(heads[-1], trace))
    trace.record(Action("back"), "r3", sha("x3"))
    written = len(archive.records)
    for remembered in heads:
        store.reset_head(episode_id, remembered)
        assert store.head_of(episode_id) == remembered
        for stale in heads:
            if stale == remembered:
                continue
            with pytest.raises(TraceConflictError) as info:
                store.commit(stale, trace)
            message = str(info.value)
            assert f"its head is now {remembered[:12]}..., this run extends {stale[:12]}...);" in message
            assert f"thread {episode_id!r}" in message
    assert len(archive.records) == written


def test_a_head_read_back_from_a_checkpoint_still_commits(archive, episode_id) -> None:
    """Checkpointers store the head as JSON: the restored head is an equal, distinct string and must
    not look like another writer's head."""
    store = TraceStore(archive)
    trace = started(episode_id)
    head = store.commit(None, trace)
    trace.record(Action("back"), "r1", sha("x1"))
    new = store.commit(same_text(head), trace)
    assert store.head_of(episode_id) == new != head
    assert [e.index for e in store.load_trace(new)] == [1]


def test_reset_head_forgets_or_sets_the_remembered_head(archive, episode_id) -> None:
    """``reset_head(episode)`` forgets (the next commit may branch from an older head, time travel);
    ``reset_head(episode, head)`` sets it (commits must then extend that head)."""
    store = TraceStore(archive)
    trace = started(episode_id)
    older = store.commit(None, trace)
    trace.record(Action("back"), "r1", sha("x1"))
    newer = store.commit(older, trace)
    store.reset_head(episode_id)
    assert store.head_of(episode_id) is None
    branch = started(episode_id)
    branch.record(Action("home"), "r1'", sha("x1'"))
    forked = store.commit(older, branch)
    assert store.head_of(episode_id) == forked and forked != newer
    store.reset_head(episode_id, newer)
    assert store.head_of(episode_id) == newer
    with pytest.raises(TraceConflictError):
        store.commit(forked, branch)


def test_archives_without_a_url_keep_separate_heads(episode_id) -> None:
    """Heads are remembered per archive: two archives with no (empty) url are still two archives, so
    the same episode id in each is written independently."""
    first, second = RecordArchive(""), RecordArchive("")
    heads = [TraceStore(a).commit(None, started(episode_id)) for a in (first, second)]
    assert heads[0] == heads[1]  # same content, same address, in two archives
    assert (TraceStore(first).head_of(episode_id), TraceStore(second).head_of(episode_id)) == tuple(heads)
    for a in (first, second):
        TraceStore(a).reset_head(episode_id)


# ---------------------------------------------------------------------- what a commit writes
def test_commit_writes_a_node_exactly_when_the_screen_or_its_size_changed(archive, episode_id) -> None:
    """Nothing changed returns the head itself (equal values, not identical objects); an unknown size
    changes nothing; a new screen or a rotated one is recorded, whichever way the values sort."""
    store = TraceStore(archive)
    low, mid, high = sorted(sha(f"screen {i}") for i in range(3))
    trace = Trace("g", episode_id=episode_id)
    trace.observe(mid, size=(1080, 2400))
    head = store.commit(None, trace)
    trace.observe(same_text(mid), size=(1080, 2400))
    assert store.commit(head, trace) == head
    trace.observe(same_text(mid))  # size not known this time: nothing new to record
    assert store.commit(head, trace) == head
    seen = [head]
    for screen, size in ((mid, (2400, 1080)), (mid, (1080, 2400)), (high, (1080, 2400)), (low, (1080, 2400))):
        trace.observe(screen, size=size)
        head = store.commit(head, trace)
        assert head not in seen
        seen.append(head)
        loaded = TraceStore(archive).load_trace(head)
        assert (loaded.current_screenshot, loaded.current_screen_size) == (screen, size)
    assert len(store.heads(head)) == 5


def test_a_commit_of_several_events_writes_one_node_each_and_the_log_on_the_last(archive, episode_id) -> None:
    """Each intermediate node's current screen is its event's screenshot (with its size); the last one
    takes the trace's current screen and the decision log, which is written once."""
    store = TraceStore(archive)
    trace = started(episode_id)
    head = store.commit(None, trace)
    for i in (1, 2, 3):
        trace.record(Action("back"), f"r{i}", sha(f"x{i}"), screenshot_size=(100 + i, 200 + i))
    trace.observe(sha("after"), size=(720, 1280))  # observed after the last step
    head = store.commit(head, trace, [{"t": 4}])
    chain = store.heads(head)[1:]
    loaded = [store.load_trace(h) for h in chain]
    assert [(t.current_screenshot, t.current_screen_size) for t in loaded] == [
        (sha("x1"), (101, 201)),
        (sha("x2"), (102, 202)),
        (sha("after"), (720, 1280)),
    ]
    assert [len(store.load_log(h)) for h in chain] == [0, 0, 1]
    assert store.load_log(head) == [{"t": 4}]


def test_a_chain_longer_than_256_events_commits_and_loads_cold(archive, episode_id) -> None:
    """Episodes have no step limit. From index 257 on, an index read back or counted is a different int
    object from ``n + 1``: indices are compared by value when appending, committing and decoding."""
    store = TraceStore(archive)
    trace = started(episode_id, steps=300)
    trace.observe(sha("after"))
    head = store.commit(None, trace, [{"t": 301}])
    assert len(store.heads(head)) == 300
    cold = TraceStore(archive).load_trace(head, episode_id=episode_id)
    assert cold.to_dict() == trace.to_dict()
    assert TraceStore(archive).load_log(head) == [{"t": 301}]
    one_by_one = store.append(None, episode={"goal": "g", "episode_id": "other", "platform": "desktop"})
    for event in trace:
        one_by_one = store.append(one_by_one, event=event)
    assert len(TraceStore(archive).load_trace(one_by_one)) == 300


def test_current_and_its_size_default_to_the_event_then_the_parent(archive) -> None:
    """``current`` defaults to the event's screenshot, else the parent's screen, and the pixel size
    goes with the screen it belongs to."""
    store = TraceStore(archive)
    head = store.append(None, episode=root()["episode"], current=sha("x0"), current_size=(1080, 2400))
    trace = started("ep-1")
    event = trace.record(Action("back"), "r1", sha("x1"), screenshot_size=(2400, 1080))
    with_event = store.append(head, event=event)
    log_only = store.append(with_event, log=[{"t": 2}])
    for reader in (store, TraceStore(archive)):  # the cached node and the node decoded from the archive
        for h in (with_event, log_only):
            loaded = reader.load_trace(h)
            assert (loaded.current_screenshot, loaded.current_screen_size) == (sha("x1"), (2400, 1080))


def test_a_log_that_is_not_json_data_is_refused_and_nothing_is_written(archive) -> None:
    """Decision records must be JSON data: a set (TypeError) and a record that contains itself
    (ValueError) are both refused as a TraceError naming the episode."""
    store = TraceStore(archive)
    head = store.append(None, episode=root()["episode"])
    loop: dict = {"t": 1}
    loop["self"] = loop
    for bad in ([{"t": 1, "selected": {1, 2}}], [loop]):
        with pytest.raises(TraceError, match="trace node of episode 'ep-1' is not JSON data"):
            store.append(head, log=bad)
    assert list(archive.records) == [head]


# ---------------------------------------------------------------------- options and the cache
def test_options_are_keyword_only(archive) -> None:
    """``cache_size``, the node fields and the ``episode_id`` check are options: positional use is a
    TypeError (an episode id passed where a head or a size is expected must not be taken silently)."""
    with pytest.raises(TypeError):
        TraceStore(archive, 8)  # type: ignore[misc]
    store = TraceStore(archive)
    with pytest.raises(TypeError):
        store.append(None, root()["episode"])  # type: ignore[misc]
    head = store.append(None, episode=root()["episode"])
    for read in (store.load_trace, store.load_log, store.heads):
        with pytest.raises(TypeError):
            read(head, "ep-1")  # type: ignore[misc]
    assert list(archive.records) == [head]


def test_the_default_cache_keeps_the_1024_most_recently_used_heads(archive) -> None:
    store = TraceStore(archive)
    heads = [store.append(None, episode=root(f"ep-{i}")["episode"]) for i in range(1025)]
    assert [store.cached(h) for h in heads[:2]] == [False, True]
    assert all(store.cached(h) for h in heads[1:])


def test_a_cache_of_one_head_is_allowed(archive) -> None:
    """``cache_size >= 1``: a single cached head still serves an append after it without a read."""
    store = TraceStore(archive, cache_size=1)
    first = store.append(None, episode=root()["episode"])
    second = store.append(first, log=[{"t": 1}])
    assert (store.cached(first), store.cached(second), archive.reads) == (False, True, 0)
    assert store.load_log(second) == [{"t": 1}] and archive.reads == 0


def test_loading_a_child_of_a_cached_node_reads_only_the_new_node(archive, episode_id) -> None:
    """A node links to its parent's cache entry: the walk stops at the first cached node, so a reader
    that has loaded a head reads one record for the step another writer appended after it."""
    writer, reader = TraceStore(archive), TraceStore(archive)
    trace = started(episode_id, steps=2)
    head = writer.commit(None, trace)
    reader.load_trace(head)
    reads = archive.reads
    trace.record(Action("back"), "r3", sha("x3"))
    head = writer.commit(head, trace)
    assert reader.load_trace(head).to_dict() == trace.to_dict()
    assert archive.reads - reads == 1


# ---------------------------------------------------------------------- chain nodes
def test_a_node_is_stored_as_canonical_utf8_json(archive) -> None:
    """The documented node form is canonical JSON (sorted keys, no spaces) in UTF-8, text kept as-is:
    the same node written by any writer has the same bytes, hence the same head."""
    store = TraceStore(archive)
    episode = {"goal": "Envoyer le code à Zoë · 发送", "episode_id": "ép-1", "platform": "mobile"}
    head = store.append(None, episode=episode, current=sha("x0"), current_size=(1080, 2400), log=[{"t": 1}])
    expected = (
        f'{{"current":"{sha("x0")}","current_size":[1080,2400],'
        '"episode":{"episode_id":"ép-1","goal":"Envoyer le code à Zoë · 发送","platform":"mobile"},'
        '"event":null,"log":[{"t":1}],"parent":null,"v":1}'
    ).encode()
    assert archive.records[head] == expected
    assert head == hashlib.sha256(expected).hexdigest()


def test_a_record_of_another_episode_is_refused_whichever_way_the_ids_sort(archive) -> None:
    head = put(archive, root("ep-b"))
    for asked in ("ep-a", "ep-c"):
        with pytest.raises(
            TraceError, match=rf"trace record {head} belongs to episode 'ep-b', not '{asked}'"
        ):
            TraceStore(archive).load_trace(head, episode_id=asked)
    assert TraceStore(archive).load_trace(head, episode_id="ep-b").episode_id == "ep-b"


@pytest.mark.parametrize("size", [7, [1080, 2400, 3], ["wide", "tall"], [1080]])
def test_a_current_size_that_is_not_two_integers_is_refused(archive, size) -> None:
    """Non-iterables (TypeError) and wrong counts or non-numbers (ValueError) are one TraceError,
    whether written by hand into a node or passed to ``append``."""
    head = put(archive, root(current_size=size))
    with pytest.raises(TraceError, match=r"current_size=.* must be \[width, height\]"):
        TraceStore(archive).load_trace(head)
    store = TraceStore(archive)
    parent = store.append(None, episode=root()["episode"])
    with pytest.raises(TraceError, match=r"current_size=.* must be \[width, height\]"):
        store.append(parent, current=sha("x0"), current_size=size)


def test_decoded_nodes_are_immutable_and_slotted(archive) -> None:
    """Decoded nodes are shared through the LRU cache by every trace and child node loaded from them:
    a node changed in place would silently change every later load of the chain."""
    node = decode_node(sha("root"), root(current=sha("x0")), None, "ep-1")
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.current = sha("x1")  # type: ignore[misc]
    assert not hasattr(node, "__dict__")
    assert (node.current, node.n_events, node.episode["episode_id"]) == (sha("x0"), 0, "ep-1")


# ---------------------------------------------------- bugs found by this triage (fixed in trace_chain.py)
@pytest.mark.parametrize("extra", [{"current_size": 7}, {"event": {"index": 1}}])
def test_a_corrupt_node_field_is_refused_with_the_record_named(archive, extra) -> None:
    """trace_store: 'A missing or corrupt node raises TraceError naming the record hash and the
    episode.'"""
    head = put(archive, root(**extra))
    with pytest.raises(TraceError) as info:
        TraceStore(archive).load_trace(head, episode_id="ep-1")
    assert head in str(info.value)


def test_a_node_with_a_non_positive_size_is_refused(archive) -> None:
    """A stored size of (0, -3) must not load into a Trace: ``Trace.observe`` refuses such sizes, so a
    chain is held to the same rule."""
    head = put(archive, root(current=sha("x0"), current_size=[0, -3]))
    with pytest.raises(TraceError, match="current_size") as info:
        TraceStore(archive).load_trace(head)
    assert head in str(info.value)
    with pytest.raises(TraceError, match="both >= 1"):
        TraceStore(archive).append(head, current=sha("x1"), current_size=(0, -3))


@pytest.mark.parametrize(
    ("size", "ok"),
    [([1, 1], True), ([2, 1], True), ([1, 2], True), ([0, 5], False), ([5, 0], False), ([-1, -1], False)],
)
def test_stored_screen_sizes_must_be_at_least_one_pixel_each_way(archive, size, ok) -> None:
    """The boundary of the size rule, on each axis alone: 1x1 is a screen, 0 on either side is not."""
    head = put(archive, root(current=sha("x0"), current_size=size))
    if ok:
        assert TraceStore(archive).load_trace(head).current_screen_size == tuple(size)
    else:
        with pytest.raises(TraceError, match=r"current_size=.* both >= 1"):
            TraceStore(archive).load_trace(head)


def test_a_corrupt_field_error_names_the_episode_when_known(archive) -> None:
    head = put(archive, root(current=sha("x0"), current_size=7))
    with pytest.raises(TraceError, match=rf"trace record {head} of episode 'ep-1' is corrupt"):
        TraceStore(archive).load_trace(head, episode_id="ep-1")
    with pytest.raises(TraceError, match=rf"trace record {head} of this episode is corrupt"):
        TraceStore(archive).load_trace(head)
