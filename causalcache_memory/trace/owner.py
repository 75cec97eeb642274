"""One run per thread across processes: :meth:`TraceStore.commit` claims each head's successor exclusively.

A commit advances an episode's head from ``base`` to ``new``. Besides the in-process compare-and-swap of
:mod:`causalcache_memory.trace_store`, it writes the claim ``refs/<episode>/head.<base>`` (``head.root``
for a new chain) with ``archive.claim(..., exclusive=True)``: created only if absent (a hard link on local
disk, ``If-None-Match: *`` on S3), so of two processes extending the same head exactly one gets the claim,
whatever machines they run on. The claim holds ``{"child": new, "owner": "<host>.<pid>.<token>"}``.

A commit that finds the claim taken

* by the same new head (a re-run that wrote the very same node) or by this process: proceeds;
* by a process on this host that no longer runs (killed between committing and checkpointing), or after
  :meth:`TraceStore.reset_head` for this episode in this process (a deliberate take-over): overwrites it;
* torn (its bytes still unreadable after half a second of re-reads): overwrites it. Claims are created
  whole (a hard link of a complete file, an atomic object put), so no running process ever shows one
  torn; only a power loss can leave one, before the writer thread synced it (the memory syncs a claim
  off the step's thread, :class:`~causalcache_memory.archive.deferred.DeferredArchive`, and every
  checkpoint waits for that sync), and it kills the writer with it;
* otherwise: raises :class:`~causalcache_memory.errors.TraceConflictError` naming the thread and the other
  owner. The nodes already written stay in the archive (retained under the episode); nothing is lost.

Before each commit, a process that continues its own chain re-reads the claim of its previous commit: if
another process took the thread over since, the commit fails the same way. Claims live beside the
episode's references, so ``release`` (``delete_thread``) removes them with the episode.
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

#: (archive, episode) -> (base, new) of this process's last commit
_LAST: dict[tuple[str, str], tuple[str | None, str]] = {}
#: (archive, episode) -> head (or ANY) whose claim the next commit may take over
_TAKEOVER: dict[tuple[str, str], str] = {}


def _slot(head: str | None) -> str:
    return f"head.{head or 'root'}"


def _owner_is_dead(owner: str) -> bool:
    parts = owner.split(".")
    return len(parts) == 3 and process_is_dead(parts[0], parts[1])


class HeadClaims:
    """The cross-process claims of one :class:`~causalcache_memory.trace_store.TraceStore`'s archive.

    Archives without ``claim``/``read_claim`` (test doubles) keep only the in-process check."""

    def __init__(self, archive: Any) -> None:
        self.archive = archive
        self.enabled = callable(getattr(archive, "claim", None)) and callable(
            getattr(archive, "read_claim", None)
        )

    def allow_takeover(self, key: tuple[str, str], head: str | None) -> None:
        """Let the next commit of ``key`` take over the claim of ``head`` (None: whatever head it extends)."""
        _LAST.pop(key, None)
        _TAKEOVER[key] = head or ANY

    def check_still_owner(self, key: tuple[str, str], episode: str, head: str | None) -> None:
        """Raise if another process took over the thread since this process committed ``head``."""
        last = _LAST.get(key)
        if not self.enabled or last is None or last[1] != head or key in _TAKEOVER:
            return
        other = self._read(episode, last[0])
        if other is not None and other.get("owner") != OWNER and other.get("child") != head:
            raise self._conflict(episode, last[0], other, took_over=True)

    def claim(self, key: tuple[str, str], episode: str, base: str | None, new: str) -> None:
        """Claim ``base``'s successor for ``new`` (see the module doc), or raise ``TraceConflictError``."""
        if self.enabled:
            mine = json.dumps({"v": 1, "child": new, "owner": OWNER}, sort_keys=True).encode()
            existing = self.archive.claim(episode, _slot(base), mine, exclusive=True)
            if existing is None:  # read back: a store that ignores If-None-Match lets a later writer win
                existing = self.archive.read_claim(episode, _slot(base))
                existing = None if existing == mine else existing
            if existing is not None:
                other = self._parsed(existing) or self._read(episode, base)
                if not self._may_proceed(key, base, new, other):
                    raise self._conflict(episode, base, other or {}, took_over=False)
                if (other or {}).get("child") != new:
                    self.archive.claim(episode, _slot(base), mine, exclusive=False)
        _TAKEOVER.pop(key, None)
        _LAST[key] = (base, new)

    @staticmethod
    def _may_proceed(key: tuple[str, str], base: str | None, new: str, other: dict | None) -> bool:
        if key in _TAKEOVER and _TAKEOVER[key] in (ANY, base):
            return True
        if other is None:
            return False
        if TORN in other:  # its writer died with the power loss that tore it (module doc)
            return True
        owner = str(other.get("owner", ""))
        return other.get("child") == new or owner == OWNER or _owner_is_dead(owner)

    @staticmethod
    def _parsed(raw: bytes | None) -> dict | None:
        try:
            value = json.loads(raw) if raw else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def _read(self, episode: str, base: str | None) -> dict | None:
        """The claim of ``base``'s successor (a claim still being written is read again, briefly; one that
        stays unreadable is torn: ``{TORN: True}``)."""
        for _ in range(50):
            raw = self.archive.read_claim(episode, _slot(base))
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
