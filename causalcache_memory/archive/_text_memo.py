"""Screen texts this process already read or stored, by blob hash: a bounded in-memory map.

The learned selector reads the text of every event of a trace at each decision
(``archive.get_text(sha)``); without this map each read is a file open (a storage round trip on an
object store). A text of a blob never changes once stored (the first text stays,
:mod:`~causalcache_memory.archive._texts`), so a text read once is kept. A blob found *without* text is
remembered as such until a ``put_text`` for it goes through the same archive view (the memory's own
agent text or OCR), which forgets it; a text another process stores later for a blob this process
already found without one is not seen here. The map holds at most ``max_bytes`` of text (UTF-8 length,
least recently used out).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

__all__ = ["ABSENT", "TextMemo"]

#: what :meth:`TextMemo.get` returns for a hash it knows nothing about (None means "no text")
ABSENT = object()


class TextMemo:
    """Bounded LRU of ``sha256 -> text | None`` (see the module docstring)."""

    def __init__(self, max_bytes: int = 32 << 20) -> None:
        self.max_bytes = int(max_bytes)
        self._lock = threading.Lock()
        self._texts: OrderedDict[str, tuple[str | None, int]] = OrderedDict()
        self._total = 0

    def get(self, sha256: str) -> object:
        """The text remembered for ``sha256`` (None: known to have none), else :data:`ABSENT`."""
        with self._lock:
            entry = self._texts.get(sha256)
            if entry is None:
                return ABSENT
            self._texts.move_to_end(sha256)
            return entry[0]

    def put(self, sha256: str, text: str | None) -> None:
        size = 64 + (len(text.encode("utf-8", errors="replace")) if text else 0)
        if size > self.max_bytes:
            return
        with self._lock:
            old = self._texts.pop(sha256, None)
            self._total -= old[1] if old else 0
            self._texts[sha256] = (text, size)
            self._total += size
            while self._total > self.max_bytes:
                _, (_, dropped) = self._texts.popitem(last=False)
                self._total -= dropped

    def forget(self, sha256: str) -> None:
        with self._lock:
            old = self._texts.pop(sha256, None)
            self._total -= old[1] if old else 0
