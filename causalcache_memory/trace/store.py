"""A hash-chained, content-addressed store of episode traces and decision logs, kept in the archive.

Graph state and checkpoints must not grow with the episode: a checkpointer such as LangGraph's
``SqliteSaver`` rewrites the whole state at every step, so a trace kept in state costs ``O(t)`` bytes per
step and ``O(t^2)`` per episode. Here the trace lives in the archive as a chain of small JSON records
(:meth:`ScreenshotArchive.put_record`), and state keeps only the sha256 of the chain's head.

Chain node (one archive record, canonical JSON, ``sort_keys``)::

    {"v": 1,
     "parent": <sha256 of the previous node> | null,
     "episode": {"goal", "episode_id", "platform"}     # the root node only
     "event": Event.to_dict() | null,                  # the step recorded by this node, if any
     "current": <sha256 of the current screen x_t> | null,
     "current_size": [width, height],                  # optional: pixel size of the current screen
     "log": [<decision record>, ...]}                  # decision records added since the parent

``current_size`` is written only when the size is known (nodes written before it existed load unchanged).

``current`` (not in the first design sketch) is kept in every node so an observation with no event (the
first screen, or a step with no executable action) is part of the chain: ``load_trace(head)`` restores
:attr:`Trace.current_screenshot` exactly. Each append writes one node of ``O(1)`` bytes, whatever ``t``.

Heads are content addresses, so they are immutable: an older checkpoint keeps pointing at the trace as it
was then (time travel and forks in LangGraph work unchanged), and re-running a step after a crash that
writes the same node yields the same head. Every node is retained under its episode id
(:meth:`ScreenshotArchive.retain`), so ``archive.gc`` keeps the chains of live episodes and collects the
chains of released ones.

:class:`TraceStore` keeps an in-process LRU cache of decoded nodes keyed by head; a node links to its
parent's cache entry, so appending to a cached head reads nothing from the archive, and a cold load (new
process, empty cache) walks the chain once. A missing or corrupt node raises :class:`TraceError` naming
the record hash and the episode.

One writer per episode: :meth:`TraceStore.commit` is a compare-and-swap on the episode's head. The store
remembers, per archive and episode, the head it last committed (in this process); a commit that extends
any other head raises :class:`~causalcache_memory.errors.TraceConflictError` naming the episode, so a
second run writing the same LangGraph thread concurrently fails loudly instead of overwriting the first
one's steps (nothing recorded is lost). Across processes and machines each commit also claims its base
head's successor with an exclusive create in the archive (:mod:`causalcache_memory.trace.owner`), so a
second process on a running thread fails with the same error. A resume after a crash extends the
checkpoint's head (a claim of a dead process on this host is taken over). To branch deliberately from an
older head (time travel), or to take over a thread whose run died on another machine, call
:meth:`TraceStore.reset_head` first.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import TraceConflictError, TraceError
from causalcache_memory.trace import Event, Trace, check_sha256
from causalcache_memory.trace.chain import (
    CHAIN_FORMAT_VERSION,
    Node,
    decode_node,
    encode_node,
    read_node,
    size_of,
)
from causalcache_memory.trace.owner import HeadClaims

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["CHAIN_FORMAT_VERSION", "TraceStore"]

#: (archive identity, episode id) -> head last committed in this process; shared by every TraceStore
_HEADS: dict[tuple[str, str], str] = {}
_HEAD_LOCKS: dict[tuple[str, str], threading.Lock] = {}
_REGISTRY_LOCK = threading.Lock()


def _archive_key(archive: Any) -> str:
    url = getattr(archive, "url", None)
    return url if isinstance(url, str) and url else f"object-{id(archive)}"


def _head_lock(key: tuple[str, str]) -> threading.Lock:
    with _REGISTRY_LOCK:
        lock = _HEAD_LOCKS.get(key)
        if lock is None:
            lock = _HEAD_LOCKS[key] = threading.Lock()
        return lock


def _check_head(key: tuple[str, str], episode_id: str, head: str | None) -> None:
    """The in-process compare-and-swap: ``head`` must be the head this process last committed, if any."""
    current = _HEADS.get(key)
    if current is not None and current != head:
        raise TraceConflictError(
            f"thread {episode_id!r}: another run extended this episode's trace "
            f"(its head is now {current[:12]}..., this run extends {str(head)[:12]}...); one "
            "run at a time may write a thread. Wait for the other run to finish and continue "
            "from the thread's latest checkpoint, or use another thread_id (to branch from an "
            "older checkpoint on purpose, call reset_head(thread) first). Nothing recorded was lost."
        )


class TraceStore:
    """Episode traces and decision logs as hash chains of archive records.

    Args:
        archive: any archive with ``put_record``/``get_record``/``retain``
            (:class:`~causalcache_memory.archive.LocalArchive`, :class:`~causalcache_memory.archive.FsspecArchive`).
        cache_size: heads kept in the in-process LRU cache.
    """

    def __init__(self, archive: ScreenshotArchive, *, cache_size: int = 1024) -> None:
        for method in ("put_record", "get_record", "retain"):
            if not callable(getattr(archive, method, None)):
                raise TraceError(
                    f"archive {archive!r} has no {method}(): the trace store needs an archive with JSON "
                    "records (LocalArchive or FsspecArchive)"
                )
        if cache_size < 1:
            raise ValueError(f"cache_size={cache_size!r} must be >= 1")
        self.archive = archive
        self.cache_size = cache_size
        self._cache: OrderedDict[str, Node] = OrderedDict()
        self._lock = threading.Lock()
        self._claims = HeadClaims(archive)

    # ------------------------------------------------------------------ writing
    def append(
        self,
        head: str | None,
        *,
        episode: Mapping[str, str] | None = None,
        event: Event | None = None,
        current: str | None = None,
        current_size: tuple[int, int] | None = None,
        log: Sequence[Mapping[str, Any]] = (),
    ) -> str:
        """Write one node after ``head`` (``None``: a new chain) and return the new head.

        A low-level write with no compare-and-swap: agents use :meth:`commit`.

        ``episode`` (``goal``, ``episode_id``, ``platform``) is required for the root and refused after it.
        ``current`` defaults to the event's screenshot, else the parent's current screen.
        """
        parent = self._node(head, None) if head is not None else None
        if parent is None:
            if not episode:
                raise TraceError("the first node of a trace chain needs episode={goal, episode_id, platform}")
            meta = {k: str(episode[k]) for k in ("goal", "episode_id", "platform")}
        elif episode is not None:
            raise TraceError(f"episode metadata belongs to the root node only (appending after {head})")
        else:
            meta = dict(parent.episode)
        n_events = parent.n_events if parent is not None else 0
        if event is not None:
            if event.index != n_events + 1:
                raise TraceError(
                    f"trace chain {head} of episode {meta['episode_id']!r} has {n_events} events; "
                    f"cannot append event {event.index}"
                )
            n_events += 1
        if current is None:
            current = event.screenshot if event is not None else (parent.current if parent else None)
            if current_size is None:
                current_size = (
                    event.screenshot_size if event is not None else (parent.current_size if parent else None)
                )
        if current is not None:
            check_sha256(current, what="current screenshot")
        record: dict[str, Any] = {
            "v": CHAIN_FORMAT_VERSION,
            "parent": head,
            "event": event.to_dict() if event is not None else None,
            "current": current,
            "log": [dict(r) for r in log],
        }
        if parent is None:
            record["episode"] = meta
        if current_size is not None:
            record["current_size"] = list(size_of(current_size))  # type: ignore[arg-type]
        try:
            sha = self.archive.put_record(encode_node(record))
            self.archive.retain(meta["episode_id"], [sha])
        except (TypeError, ValueError) as exc:
            raise TraceError(f"trace node of episode {meta['episode_id']!r} is not JSON data: {exc}") from exc
        frozen_log = tuple(json.loads(encode_node({"log": record["log"]}))["log"])  # detached from the caller
        node = Node(sha, parent, meta, event, current, frozen_log, n_events, size_of(current_size))
        self._remember(node)
        return sha

    def commit(self, head: str | None, trace: Trace, log: Sequence[Mapping[str, Any]] = ()) -> str:
        """Append what ``trace`` gained since ``head`` (new events, new current screen) and ``log``.

        ``trace`` must extend the chain at ``head`` (typically it was loaded from it and then mutated).
        Writes one node per new event (the log goes on the last), or one node when only the current
        screen or the log changed; returns ``head`` itself when nothing changed.

        Compare-and-swap: ``head`` must still be the episode's head (the one this process last committed
        for it, if any), else :class:`~causalcache_memory.errors.TraceConflictError` is raised and nothing
        is written.
        """
        key = (_archive_key(self.archive), trace.episode_id)
        with _head_lock(key):
            _check_head(key, trace.episode_id, head)
            self._claims.check_still_owner(key, trace.episode_id, head)
            new_head = self._commit(head, trace, log)
            if new_head != head:
                self._claims.claim(key, trace.episode_id, head, new_head)
            _HEADS[key] = new_head
            return new_head

    def reserve(self, episode_id: str, head: str | None) -> None:
        """Claim ``head``'s successor for this process before the step that extends it acts (a tool
        call with side effects): raises :class:`~causalcache_memory.errors.TraceConflictError` as
        :meth:`commit` would, but before the action runs. Of several processes resuming a dead run
        from one checkpoint, exactly one gets past this call (:mod:`causalcache_memory.trace.owner`);
        its own later :meth:`commit` after ``head`` proceeds."""
        key = (_archive_key(self.archive), episode_id)
        with _head_lock(key):
            _check_head(key, episode_id, head)
            self._claims.check_still_owner(key, episode_id, head)
            if self._claims.enabled:
                self._claims.reserve(key, episode_id, head)

    def reset_head(self, episode_id: str, head: str | None = None) -> None:
        """Forget (or set) the head remembered for ``episode_id``: the next commit may extend any head
        (``head``: that head), taking over the thread from another process if one claimed it
        (:mod:`causalcache_memory.trace.owner`)."""
        key = (_archive_key(self.archive), episode_id)
        with _head_lock(key):
            self._claims.allow_takeover(key, head)
            if head is None:
                _HEADS.pop(key, None)
            else:
                _HEADS[key] = check_sha256(head, what="trace chain head")

    def head_of(self, episode_id: str) -> str | None:
        """The head this process last committed for ``episode_id`` (None if none)."""
        return _HEADS.get((_archive_key(self.archive), episode_id))

    def _commit(self, head: str | None, trace: Trace, log: Sequence[Mapping[str, Any]]) -> str:
        node = self._node(head, trace.episode_id) if head is not None else None
        known = node.n_events if node is not None else 0
        if len(trace) < known:
            raise TraceError(
                f"trace of episode {trace.episode_id!r} has {len(trace)} events but its chain head {head} "
                f"has {known}: commit a trace loaded from that head"
            )
        episode = None
        if node is None:
            episode = {"goal": trace.goal, "episode_id": trace.episode_id, "platform": trace.platform}
        new = trace.events[known:]
        size = trace.current_screen_size
        if (
            not new
            and node is not None
            and not log
            and trace.current_screenshot == node.current
            and (size is None or size == node.current_size)
        ):
            return head  # type: ignore[return-value]
        for i, event in enumerate(new):
            last = i == len(new) - 1
            current = trace.current_screenshot if last else event.screenshot
            head = self.append(
                head,
                episode=episode,
                event=event,
                current=current,
                current_size=size if last else event.screenshot_size,
                log=log if last else (),
            )
            episode = None
        if not new:
            head = self.append(
                head, episode=episode, current=trace.current_screenshot, current_size=size, log=log
            )
        return head  # type: ignore[return-value]

    # ------------------------------------------------------------------ reading
    def load_trace(self, head: str, *, episode_id: str | None = None) -> Trace:
        """The trace at ``head`` (a fresh, mutable :class:`Trace`)."""
        node = self._node(head, episode_id)
        events: list[Event] = []
        walk: Node | None = node
        while walk is not None:
            if walk.event is not None:
                events.append(walk.event)
            walk = walk.parent
        meta = node.episode
        trace = Trace(meta["goal"], episode_id=meta["episode_id"], platform=meta["platform"])
        for event in reversed(events):
            trace.append(event)
        trace.current_screenshot = node.current
        trace.current_screen_size = node.current_size
        return trace

    def load_log(self, head: str, *, episode_id: str | None = None) -> list[dict[str, Any]]:
        """Every decision record in the chain up to ``head``, oldest first (fresh dict copies)."""
        chunks: list[tuple[Mapping[str, Any], ...]] = []
        walk: Node | None = self._node(head, episode_id)
        while walk is not None:
            if walk.log:
                chunks.append(walk.log)
            walk = walk.parent
        return [json.loads(json.dumps(r)) for chunk in reversed(chunks) for r in chunk]

    def heads(self, head: str, *, episode_id: str | None = None) -> list[str]:
        """Hashes of every node from the root to ``head`` (the records an episode's chain retains)."""
        out: list[str] = []
        walk: Node | None = self._node(head, episode_id)
        while walk is not None:
            out.append(walk.head)
            walk = walk.parent
        return out[::-1]

    def cached(self, head: str) -> bool:
        """Whether ``head`` is decoded in this store's cache (no archive access)."""
        with self._lock:
            return head in self._cache

    def clear_cache(self) -> None:
        with self._lock:
            self._cache.clear()

    # ------------------------------------------------------------------ chain walking
    def _remember(self, node: Node) -> None:
        with self._lock:
            self._cache[node.head] = node
            self._cache.move_to_end(node.head)
            while len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)

    def _cached(self, head: str) -> Node | None:
        with self._lock:
            node = self._cache.get(head)
            if node is not None:
                self._cache.move_to_end(head)
            return node

    def _node(self, head: str | None, episode_id: str | None) -> Node:
        """The decoded node ``head``: from the cache, else by walking the archive down to a cached node."""
        check_sha256(head, what="trace chain head")
        hit = self._cached(head)  # type: ignore[arg-type]
        if hit is not None:
            return hit
        pending: list[tuple[str, dict[str, Any]]] = []
        sha: str | None = head
        base: Node | None = None
        while sha is not None:
            base = self._cached(sha)
            if base is not None:
                break
            data = read_node(self.archive, sha, episode_id)
            pending.append((sha, data))
            sha = data["parent"]
        for sha, data in reversed(pending):
            base = decode_node(sha, data, base, episode_id)
            self._remember(base)
        assert base is not None
        return base
