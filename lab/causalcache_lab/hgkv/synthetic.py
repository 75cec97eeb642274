"""A tiny colour-recall task whose targets depend on what a *history* screenshot shows (tests, smoke runs).

Each trajectory shows ``colours - 1`` distinct solid-colour screens; on a screen of colour ``c`` the
expert clicks the swatch of ``c`` (response ``"click <c>"``). Then a grey *recall* screen appears and the
expert repeats the click of an early screen ``i`` (``i`` in ``2..recall_max``): the target recurs at
step ``i`` and the screenshot that preceded it, ``x_i``, is the only image showing the recalled colour.
The current (grey) screen carries no information about the target, so only a restored history image
can make the target more likely.
"""

from __future__ import annotations

import io
import random
from typing import Any

from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_memory.actions.model import Action

__all__ = ["COLOURS", "colour_recall_trajectories", "same_click", "short_summary"]

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 200, 60),
    "blue": (30, 60, 220),
    "yellow": (230, 220, 40),
    "purple": (150, 40, 190),
    "orange": (240, 140, 20),
    "cyan": (40, 210, 220),
    "pink": (240, 120, 180),
}
_GREY = (128, 128, 128)


def _png(colour: tuple[int, int, int], size: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (size, size), colour).save(buf, format="PNG")
    return buf.getvalue()


def _click(name: str) -> Action:
    k = list(COLOURS).index(name)
    return Action("click", x=(k + 0.5) / len(COLOURS), y=0.5, target=name)


def same_click(a: Action, b: Action) -> bool:
    """Equivalence of this task's actions: same type and the same swatch."""
    return a.type == b.type and a.x == b.x and a.y == b.y


def short_summary(index: int, action: Action, **_: Any) -> str:
    """A one-token-ish summary (keeps tiny-model prompts short): ``"<index>."``."""
    return f"{index}."


def colour_recall_trajectories(
    archive: Any, n: int, *, seed: int = 0, colours: int = 8, size: int = 56, recall_max: int = 3
) -> list[Trajectory]:
    """``n`` colour-recall trajectories of ``colours`` steps; screenshots are stored in ``archive``."""
    rng = random.Random(seed)
    names = list(COLOURS)[:colours]
    shots = {name: archive.put(_png(COLOURS[name], size)).sha256 for name in names}
    grey = archive.put(_png(_GREY, size)).sha256
    done = archive.put(_png((255, 255, 255), size)).sha256
    out = []
    for k in range(n):
        order = rng.sample(names, colours - 1)
        screens = [shots[c] for c in order] + [grey, done]
        recall = order[rng.randint(2, recall_max) - 1]  # x_i with i in 2..recall_max
        steps = [Step(_click(c), f"click {c}", screens[s], screens[s + 1]) for s, c in enumerate(order)]
        steps.append(Step(_click(recall), f"click {recall}", grey, done))
        out.append(
            Trajectory(
                f"recall-{seed}-{k}", "Click the colour you saw.", "desktop", (size, size), tuple(steps)
            )
        )
    return out
