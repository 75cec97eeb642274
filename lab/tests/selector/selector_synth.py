"""A small synthetic stand-in world for selector tests.

Trajectories of random pointer actions in which, at some decisions, the gold action repeats the action
taken right after an earlier event ``k`` (so ``v_k``, the screen that action was taken on, is the useful
restoration). :class:`MarkerPolicy` scores a prompt higher when the history images include such a useful
screenshot, and a little higher when the newest event's screenshot is present.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import numpy as np

from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_memory.actions import Action

APPS = ("Mail", "Notes", "Shop")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class DictArchive:
    """Minimal archive stand-in: every hash is present (prompts never read pixels here)."""

    url = "memory://selector-tests"

    def __contains__(self, item: object) -> bool:
        return isinstance(item, str)


class FakeThumbs:
    """Thumbnail source: a deterministic colour per hash; marker screens are bright."""

    def __init__(self, bright: set[str] | None = None) -> None:
        self.bright = bright or set()

    def get(self, sha256: str) -> np.ndarray:
        rng = np.random.default_rng(int(sha256[:8], 16))
        base = 0.9 if sha256 in self.bright else 0.3
        return (base + 0.1 * rng.random((32, 32, 3))).astype(np.float32)


def png(name: str) -> bytes:
    """A tiny PNG whose colour is derived from ``name``."""
    import io

    from PIL import Image

    h = hashlib.sha256(name.encode()).digest()
    buf = io.BytesIO()
    Image.new("RGB", (16, 16), (h[0], h[1], h[2])).save(buf, format="PNG")
    return buf.getvalue()


def make_trajectories(
    n: int, *, length: int = 16, seed: int = 0, archive=None
) -> tuple[list[Trajectory], dict[str, set[str]]]:
    """``n`` trajectories plus ``useful[target_response] -> {sha of useful screenshots}``.

    With ``archive`` every screen is stored there as a tiny PNG (and addressed by its real hash).
    """
    rng = random.Random(seed)
    trajs, useful = [], {}
    for i in range(n):
        tid = f"traj{seed}-{i}"
        actions: list[Action] = []
        for t in range(1, length + 1):
            if t >= 8 and rng.random() < 0.6:
                src = rng.randint(2, t - 6)  # a_t repeats a_src; event src-1 (age >= 7) is the useful one
                actions.append(actions[src - 1])
            else:
                actions.append(Action("click", x=round(rng.random(), 3), y=round(rng.random(), 3)))
        names = [f"{tid}:screen:{k}" for k in range(length + 1)]
        screens = (
            [archive.put(png(x)).sha256 for x in names] if archive is not None else [sha(x) for x in names]
        )
        steps = []
        for t, a in enumerate(actions, 1):
            response = f"{tid} step {t}: click ({a.x:.3f}, {a.y:.3f})"
            steps.append(Step(a, response, screens[t - 1], screens[t], app=APPS[(t // 5) % 3]))
            useful[response] = {screens[k] for k in range(1, t - 1) if actions[k] == a}
            # screens[k] = x_{k+1} = v_k; a_{k+1} = actions[k] taken on it
        trajs.append(Trajectory(tid, "copy the code from the notes", "desktop", (100, 100), tuple(steps)))
    return trajs, useful


class MarkerPolicy:
    """Q(S) = -2 + 1.0·[a useful screenshot shown] + 0.15·[newest shown] + 0.05·#(others of age <= 4) + noise."""

    name = "marker-policy"

    def __init__(self, useful: dict[str, set[str]]) -> None:
        self.useful = useful
        self.calls: list[list[tuple[int | None, ...]]] = []

    def score(self, prompts: Sequence, targets: Sequence[str]) -> list[float]:
        out = []
        self.calls.append([tuple(i.event_index for i in p.prompt.history_images) for p in prompts])
        for p, target in zip(prompts, targets, strict=True):
            hist = p.prompt.history_images
            shas = {i.sha256 for i in hist}
            t = p.prompt.allocation.t
            q = -2.0 + (1.0 if shas & self.useful.get(target, set()) else 0.0)
            q += 0.15 if any(i.event_index == t - 1 for i in hist) else 0.0
            q += 0.05 * sum(1 for i in hist if 2 <= t - i.event_index <= 4)
            q += int(sha(target + ",".join(sorted(shas)))[:4], 16) / 65536 * 1e-3
            out.append(q)
        return out

    def generate(self, prompt):  # pragma: no cover - not used by the selector
        raise NotImplementedError


def selector_setup(n: int = 12, length: int = 14, seed: int = 0, archive: str | None = None) -> dict:
    """Recipe ``setup`` factory: trajectories, archive and labeller policy of the stand-in world."""
    if archive is None:
        store = DictArchive()
        trajs, useful = make_trajectories(n, length=length, seed=seed)
    else:
        from causalcache_memory.archive import LocalArchive

        store = LocalArchive(archive)
        trajs, useful = make_trajectories(n, length=length, seed=seed, archive=store)
    return {"trajectories": trajs, "archive": store, "policy": MarkerPolicy(useful)}
