"""Scoring and slips of the simulated policy: a proper per-token log-likelihood of a target response under
the simulator's action distribution, where a slip lands, and the free-text thought.

The target is parsed into an action and tokenized as: the action type (1 token), the pointer ``x`` and
``y`` (1 token each, when present), the typed/opened text (1 token per character plus an end token).
With ``c = 1 - eps`` the confidence of the intended action ``a*``:

* type token: ``log(c + eps/8)`` if it matches ``a*``, else ``log(eps/8)``;
* each coordinate: ``log(1 - e)`` inside ``a*``'s box (grown by half a cell), ``log(e/n)`` inside one of
  the ``n`` other text boxes, ``log 1e-3`` elsewhere, with ``e = clip(eps, 0.02, 0.5)``;
* text characters when the intended text is known (goal, or read in an image): ``log(q)`` for the right
  character with ``q = max(0.5, 0.97 - read_error)`` (a value read through a crowded or shrunken image
  is less certain), ``log((1 - q)/|Sigma|)`` otherwise; when the value is *not* readable:
  ``log(1/|Sigma|)`` for characters of the value kind's alphabet ``Sigma``, ``log 1e-4`` otherwise.
"""

from __future__ import annotations

import math
import random

from causalcache_lab.world.font import CELL_H, CELL_W
from causalcache_lab.world.ocr import OcrLine, OcrResult
from causalcache_lab.world.sim_reading import PromptView
from causalcache_memory.actions.model import Action

__all__ = ["misclick_target", "score_action", "thought", "typo"]

_N_TYPES = 8
_LOG_MISS = math.log(1e-3)


def _grow(box: tuple[float, float, float, float], size: tuple[int, int]) -> tuple[float, float, float, float]:
    dx, dy = CELL_W / 2 / size[0], CELL_H / 2 / size[1]
    return box[0] - dx, box[1] - dy, box[2] + dx, box[3] + dy


def _inside(box: tuple[float, float, float, float], x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def score_action(view: PromptView, action: Action | None) -> float:
    """Mean per-token log-likelihood of ``action`` (None = unparseable target) under ``view``."""
    if action is None:
        return math.log(1e-6)
    intended = view.intended or Action("done", status="failure")
    eps = min(max(view.eps, 1e-4), 0.5)
    conf = 1.0 - eps
    logps = [math.log(conf + eps / _N_TYPES) if action.type == intended.type else math.log(eps / _N_TYPES)]
    if action.x is not None and action.y is not None:
        for _ in (0, 1):
            logps.append(_point_logp(view, action.x, action.y, intended))
    text = action.text if action.type in ("type", "open_app", "answer") else None
    if text is not None:
        logps.extend(_text_logps(view, text, intended.text if intended.type == action.type else None))
    return sum(logps) / len(logps)


def _point_logp(view: PromptView, x: float, y: float, intended: Action) -> float:
    eps = min(max(view.eps, 0.02), 0.5)
    if view.box is not None and intended.x is not None and _inside(_grow(view.box, view.size), x, y):
        return math.log(1.0 - eps)
    others = [b for b in view.boxes if b != view.box]
    if any(_inside(b, x, y) for b in others):
        return math.log(eps / max(1, len(others)))
    return _LOG_MISS


def _text_logps(view: PromptView, text: str, intended: str | None) -> list[float]:
    """Per-character log-probabilities of ``text`` plus an end token."""
    if intended is None:
        return [math.log(1e-4)] * (len(text) + 1)
    if view.known:
        sigma = max(len(set(view.alphabet)), 64)
        q = max(0.5, 0.97 - view.read_error)
        wrong = math.log((1.0 - q) / sigma)
        out = [math.log(q) if i < len(intended) and ch == intended[i] else wrong for i, ch in enumerate(text)]
        out.append(math.log(q) if len(text) == len(intended) else math.log(1.0 - q))
        return out
    alphabet = set(view.alphabet)
    uniform = math.log(1.0 / max(1, len(alphabet)))
    out = [uniform if ch in alphabet else math.log(1e-4) for ch in text]
    out.append(math.log(0.5))
    return out


def misclick_target(screen: OcrResult, view: PromptView, rng: random.Random) -> OcrLine | None:
    """Where a slip lands: the vertically nearest text line on another row (70%) or any such line (30%).

    Lines in the title bar are never hit. Neighbours in lists are other orders/contacts/events, so a
    slip there often goes unnoticed (the next planned step can still be taken) and the task fails.
    """
    bar = 3 * CELL_H
    row = view.box[1] if view.box is not None else -1.0
    others = [ln for ln in screen.lines if ln.box_px[1] >= bar and ln.box_rel[1] != row]
    if not others or view.box is None:
        return None
    if rng.random() < 0.7:
        cy = (view.box[1] + view.box[3]) / 2
        return min(others, key=lambda ln: (abs(ln.center_rel[1] - cy), ln.box_rel[0]))
    return others[rng.randrange(len(others))]


def typo(text: str, rng: random.Random) -> str:
    """``text`` with one character replaced by a neighbouring one of the same class (a typing slip)."""
    if not text:
        return text
    i = rng.randrange(len(text))
    ch = text[i]
    if ch.isdigit():
        new = str((int(ch) + rng.choice((1, 9))) % 10)
    elif ch.isalpha():
        new = chr((ord(ch.lower()) - 97 + rng.choice((1, 25))) % 26 + 97)
        new = new.upper() if ch.isupper() else new
    else:
        new = ch
    return text[:i] + new + text[i + 1 :]


def thought(action: Action) -> str:
    """A short free-text thought for ``action`` (not scored; never names a remembered value)."""
    if action.type == "click":
        return f"I will tap {action.target}."
    if action.type == "open_app":
        return f"I need the {action.text} app."
    if action.type == "type":
        return f"I will type into {action.target}."
    if action.type == "back":
        return "This is not the screen I need; going back."
    if action.type == "done":
        return "The task is complete."
    return "Next step."
