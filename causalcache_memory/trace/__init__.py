"""The episode trace and where it is kept.

* :mod:`.events`: :class:`Trace` and :class:`Event`, the complete append-only history of one episode
  (summaries, verbatim replies, screenshot hashes; never pixels). Re-exported here:
  ``from causalcache_memory.trace import Trace``.
* :mod:`.store`: :class:`~causalcache_memory.trace.store.TraceStore`, a trace and its decision log as a
  hash chain of small JSON records in the archive (graph state keeps only the head);
* :mod:`.chain`: the chain's node format (encode, read, verify);
* :mod:`.owner`: one run per thread across processes (head claims in the archive).
"""

from causalcache_memory.trace.events import Event, Trace, check_sha256

__all__ = ["Event", "Trace", "check_sha256"]
