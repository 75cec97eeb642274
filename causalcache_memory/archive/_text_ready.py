"""Whether each screen's text was ready at the decisions that could use it (the writer's on-time counts).

:class:`TextClock` keeps, per screen hash, the status of its text (``pending``, ``running``, ``given``,
``ocr``, ``cached``, ``dropped``, ``failed``, ``cancelled``; the newest 65,536 hashes) and, per agent
thread, its screens in arrival order (the newest 256 to 512). At a decision of a thread, every screen
but the newest (the one decided on) is judged once, at the first decision after it arrived: **ready**
(text stored: given, OCR'd, already in the archive), **late** (still waiting or being read) or
**missing** (dropped, failed, cancelled, unknown). Not thread-safe: the writer holds its lock.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["READY", "TextClock"]

#: statuses of a screen whose text is stored
READY = frozenset({"given", "ocr", "cached"})
_WAITING = frozenset({"pending", "running"})


class TextClock:
    """Per-screen text statuses and per-thread ready/late/missing counts (see the module docstring)."""

    def __init__(self, counts: dict[str, int]) -> None:
        self.counts = counts  # the writer's counters: screens_*, decisions, decisions_text_ready
        self.status: OrderedDict[str, str] = OrderedDict()
        self._threads: OrderedDict[str, list[str]] = OrderedDict()
        self._judged: dict[str, int] = {}

    def set(self, sha256: str, status: str) -> None:
        self.status.pop(sha256, None)
        self.status[sha256] = status
        while len(self.status) > 65536:
            self.status.popitem(last=False)

    def screen(self, thread: str, sha256: str) -> None:
        """Screen ``sha256`` arrived in ``thread`` (a repeat of its newest screen is not counted twice)."""
        screens = self._threads.pop(thread, None) or []
        if not screens or screens[-1] != sha256:
            screens.append(sha256)
        if len(screens) > 512:
            cut = len(screens) - 256
            del screens[:cut]
            self._judged[thread] = max(0, self._judged.get(thread, 0) - cut)
        self._threads[thread] = screens
        while len(self._threads) > 4096:
            old, _ = self._threads.popitem(last=False)
            self._judged.pop(old, None)

    def decision(self, thread: str) -> bool:
        """Judge ``thread``'s screens that became history; True when all its earlier screens (newest
        256) have their text now."""
        history = self._threads.get(thread, [])[:-1]
        for sha in history[self._judged.get(thread, 0) :]:
            status = self.status.get(sha)
            kind = "ready" if status in READY else "late" if status in _WAITING else "missing"
            self.counts[f"screens_{kind}"] += 1
        self._judged[thread] = len(history)
        ready = all(self.status.get(sha) in READY for sha in history[-256:])
        self.counts["decisions"] += 1
        self.counts["decisions_text_ready"] += int(ready)
        return ready
