"""One run per thread across processes: :meth:`TraceStore.commit` claims each head's successor exclusively.

A commit advances an episode's head from ``base`` to ``new``. Besides the in-process compare-and-swap of
:mod:`causalcache_memory.trace.store`, it writes the claim ``refs/<episode>/head.<base>`` (``head.root``
for a new chain) with ``archive.claim(..., exclusive=True)``: created only if absent (a hard link on local
disk, ``If-None-Match: *`` on S3), so of two processes extending the same head exactly one gets the claim,
whatever machines they run on. The claim holds ``{"child": new, "owner": "<host>.<pid>.<token>"}``.
Nothing ever overwrites a claim.

**Take-over records.** A claim whose writer is gone is taken over through the thread's take-over log
``refs/<episode>/take.1``, ``take.2``, ...: each record ``{"base", "child", "owner"}`` is created
exclusively too, and only right after its predecessor was read, so the log has no gaps. The claim of a
head's successor in force is the last take-over record naming that head as ``base``, else the
``head.<base>`` claim. A commit that finds the claim in force held

* by the same new head (a re-run that wrote the very same node: every process that writes
  byte-identical steps proceeds, as the node is the same) or by this process: proceeds, writing nothing;
* by a process on this host that no longer runs (killed between committing and checkpointing), torn (its
  bytes still unreadable after half a second of re-reads: only a power loss leaves one, and it killed its
  writer), or after :meth:`TraceStore.reset_head` for this episode in this process (a deliberate
  take-over): creates the next take-over record ``take.<n+1>``, where ``n`` is the last record it read.
  If another process created ``take.<n+1>`` first, the commit does not retry past a live rival: it
  proceeds only if that record names the same base and new head, else it fails;
* otherwise: raises :class:`~causalcache_memory.errors.TraceConflictError` naming the thread and the other
  owner. The nodes already written stay in the archive (retained under the episode); nothing is lost.

Why exactly one of N resumers wins: each resumer that finds the dead owner's claim read the log up to some
``take.<n>`` and creates ``take.<n+1>``. Exclusive creation lets one process create each name. Two
take-overs of the same head by live processes would need two records naming that base; the later one,
``take.<m>``, was created by a process that read ``take.<m-1>`` and every record before it (no gaps), so it
saw the earlier take-over's live owner as the claim in force and refused (no ``reset_head``). A resumer
that lost the create of ``take.<n+1>`` reads the winner's record and fails.

**Still-owner check.** Every commit of a process that has written the thread before reads
``take.<seen+1>``, ``seen`` being the last record it knows of (read before its first claim of the thread):
a take-over of any of its claims by another process must create exactly that record first (no gaps), so
the check cannot miss one; a record of another live process fails the commit ("took this thread over"),
before anything of it is written. One read per commit, as many as before.

**Reservations.** :meth:`TraceStore.reserve` claims a head's successor before the step that extends it
acts (the LangGraph middleware, before a tool call), with the child ``reserved:<owner>``, which no other
process writes: of several resumers reserving one head, one goes on and the others fail before acting;
the reserving process's own commit then finds its claim and proceeds.

The argument relies on the store creating a name at most once: ``os.link`` on a local file system; on S3
(and compatible stores that implement it) a ``PutObject`` with ``If-None-Match: *``, which S3 decides
atomically. After a create that reported success the claim is read back, so a store that ignores the
header is caught when it let a later writer win. Claims live beside the episode's references, so
``release`` (``delete_thread``) removes them with the episode.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from causalcache_memory.archive._keys import process_is_dead, process_tag
from causalcache_memory.errors import TraceConflictError

__all__ = ["OWNER", "HeadClaims"]

#: this process's owner id in claims: ``<host>.<pid>.<random token>``
OWNER = f"{process_tag()}.{uuid.uuid4().hex[:12]}"
#: a take-over allowed for whatever head the next commit extends
ANY = "*"
#: what :meth:`HeadClaims._read` returns for a claim whose bytes stay unreadable (torn by a power loss)
TORN = "torn"
#: how many lost creates of a take-over record (each to a rival that died at once) a commit retries
_RETRIES = 8

#: (archive, episode) -> the last take-over record number this process has read or written
_SEEN: dict[tuple[str, str], int] = {}
#: (archive, episode) -> head (or ANY) whose claim the next commit may take over
_TAKEOVER: dict[tuple[str, str], str] = {}


def _slot(head: str | None) -> str:
    return f"head.{head or 'root'}"


def _take(n: int) -> str:
    return f"take.{n}"


def _owner_is_dead(owner: str) -> bool:
    parts = owner.split(".")
    return len(parts) == 3 and process_is_dead(parts[0], parts[1])


class HeadClaims:
    """The cross-process claims of one :class:`~causalcache_memory.trace.store.TraceStore`'s archive.

    Archives without ``claim``/``read_claim`` (test doubles) keep only the in-process check."""

    def __init__(self, archive: Any) -> None:
        self.archive = archive
        self.enabled = callable(getattr(archive, "claim", None)) and callable(
            getattr(archive, "read_claim", None)
        )

    def allow_takeover(self, key: tuple[str, str], head: str | None) -> None:
        """Let the next commit of ``key`` take over the claim of ``head`` (None: whatever head it extends)."""
        _TAKEOVER[key] = head or ANY

    def check_still_owner(self, key: tuple[str, str], episode: str, head: str | None) -> None:
        """Raise if another process took the thread over since this process last read its take-over log
        (the first commit of a thread in this process, or one after ``reset_head``, reads the log to its
        end instead). Called before anything of the commit is written."""
        if not self.enabled:
            return
        seen = _SEEN.get(key)
        if seen is None or key in _TAKEOVER:
            n = seen or 0
            while self.archive.read_claim(episode, _take(n + 1)) is not None:
                n += 1
            _SEEN[key] = n
            return
        while True:
            record = self._read(episode, _take(seen + 1))
            if record is None:
                _SEEN[key] = seen
                return
            seen += 1
            if TORN not in record and record.get("owner") != OWNER:
                _SEEN[key] = seen
                raise self._conflict(episode, record.get("base"), record, took_over=True)

    def reserve(self, key: tuple[str, str], episode: str, base: str | None) -> None:
        """Claim ``base``'s successor for this process before its next node is known (before the step's
        action runs): the claim names the child ``reserved:<owner>``, which no other process writes, so
        of several processes reserving one head (resumers of a dead run) exactly one goes on; this
        process's own commit after ``base`` then finds its claim and proceeds."""
        self.claim(key, episode, base, f"reserved:{OWNER}")

    def claim(self, key: tuple[str, str], episode: str, base: str | None, new: str) -> None:
        """Claim ``base``'s successor for ``new`` (see the module doc), or raise ``TraceConflictError``."""
        if self.enabled:
            mine = {"v": 1, "child": new, "owner": OWNER}
            if self._create(episode, _slot(base), mine) is not None:
                self._take_over(key, episode, base, new)
        _TAKEOVER.pop(key, None)

    def _take_over(self, key: tuple[str, str], episode: str, base: str | None, new: str) -> None:
        allowed = key in _TAKEOVER and _TAKEOVER[key] in (ANY, base)
        for _ in range(_RETRIES):
            n, other = self._in_force(episode, base)
            _SEEN[key] = max(_SEEN.get(key, 0), n)
            if other is not None and TORN not in other and other.get("child") == new:
                return  # the very same node: nothing to take over
            if other is not None and TORN not in other and other.get("owner") == OWNER:
                return
            if not (allowed or other is None or TORN in other or _owner_is_dead(str(other.get("owner")))):
                raise self._conflict(episode, base, other, took_over=False)
            record = {"v": 1, "base": base or "root", "child": new, "owner": OWNER}
            lost = self._create(episode, _take(n + 1), record)
            if lost is None:
                _SEEN[key] = n + 1
                return
            rival = self._parsed(lost)
            if rival is None or _owner_is_dead(str(rival.get("owner"))):
                allowed = False  # the rival is gone too: look again, by the ordinary rules
                continue
            if rival.get("base") == (base or "root") and rival.get("child") == new:
                _SEEN[key] = n + 1
                return
            _SEEN[key] = n + 1
            raise self._conflict(episode, base, rival, took_over=False)
        raise self._conflict(episode, base, {}, took_over=False)

    def _in_force(self, episode: str, base: str | None) -> tuple[int, dict | None]:
        """``(n, claim)``: the take-over log's length and the claim of ``base``'s successor in force (the
        last record naming ``base``, else the ``head.<base>`` claim; ``{TORN: True}`` for a torn one)."""
        claim = self._read(episode, _slot(base))
        n = 0
        while (record := self._read(episode, _take(n + 1))) is not None:
            n += 1
            if TORN not in record and record.get("base") == (base or "root"):
                claim = record
        return n, claim

    def _create(self, episode: str, name: str, value: dict) -> bytes | None:
        """Create ``name`` holding ``value`` if absent: None when this call created it, else the bytes in
        place (read back: a store that ignores ``If-None-Match`` lets a later writer win)."""
        mine = json.dumps(value, sort_keys=True).encode()
        existing = self.archive.claim(episode, name, mine, exclusive=True)
        if existing is None:
            existing = self.archive.read_claim(episode, name)
            return None if existing == mine else (existing or b"")
        return existing

    @staticmethod
    def _parsed(raw: bytes | None) -> dict | None:
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def _read(self, episode: str, name: str) -> dict | None:
        """The claim or record ``name`` (one still being written is read again, briefly; one that stays
        unreadable is torn: ``{TORN: True}``)."""
        for _ in range(50):
            raw = self.archive.read_claim(episode, name)
            if raw is None:
                return None
            parsed = self._parsed(raw)
            if parsed is not None:
                return parsed
            time.sleep(0.01)
        return {TORN: True}

    @staticmethod
    def _conflict(episode: str, base: str | None, other: dict, *, took_over: bool) -> TraceConflictError:
        owner = other.get("owner", "an unknown process")
        what = "took this thread over" if took_over else "already extended the same head"
        return TraceConflictError(
            f"thread {episode!r}: another run ({owner}) {what} (after {str(base or 'the root')[:12]}..., "
            f"it wrote {str(other.get('child'))[:12]}...); one run at a time may write a thread. Wait for "
            "the other run to finish and continue from the thread's latest checkpoint, or use another "
            "thread_id. If that run is dead (killed on another machine), call reset_head(thread) in the run "
            "that takes over. Nothing recorded was lost."
        )
