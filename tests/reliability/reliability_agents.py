"""A tiny policy and misbehaving allocators for the selector failure-mode tests (importable by children)."""

from __future__ import annotations

import threading
import time

from causalcache_memory import Action, Generation, make_allocation
from causalcache_memory.allocation import RecentAllocator


class TypingPolicy:
    """Always types ``ok``; counts its calls."""

    name = "typing"

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, prompt) -> Generation:
        self.calls += 1
        return Generation(response="Action: type ok", action=Action("type", text="ok"))

    def score(self, prompts, targets):  # pragma: no cover - not used
        return [0.0 for _ in prompts]


class LockedAllocator:
    """Like the learned selector: one lock held through allocate (feature extraction) and prepare."""

    uses_witness = True

    def __init__(self, name: str = "locked") -> None:
        self.name = name
        self.lock = threading.Lock()
        self.prepared: list[str] = []

    def prepare(self, archive, sha256: str) -> None:
        with self.lock:
            self.prepared.append(sha256)

    def allocate(self, ctx):
        with self.lock:
            return self._allocate(ctx)

    def _allocate(self, ctx):
        recent = RecentAllocator().allocate(ctx)
        return make_allocation(recent.selected, t=ctx.t, budget=ctx.budget, allocator=self.name)


class RaisingAllocator(LockedAllocator):
    def _allocate(self, ctx):
        raise RuntimeError("scorer exploded")


class HangingAllocator(LockedAllocator):
    """Blocks inside allocate (holding the lock) until ``release`` is set: an endless archive stall."""

    def __init__(self) -> None:
        super().__init__("hanging")
        self.release = threading.Event()

    def _allocate(self, ctx):
        self.release.wait()
        return super()._allocate(ctx)


class SlowLoadAllocator(LockedAllocator):
    """The first allocate loads a model for ``load_s`` seconds; later ones are fast."""

    def __init__(self, load_s: float = 0.6) -> None:
        super().__init__("slow-load")
        self.load_s = load_s
        self.loaded = False

    def _allocate(self, ctx):
        if not self.loaded:
            time.sleep(self.load_s)
            self.loaded = True
        return super()._allocate(ctx)
