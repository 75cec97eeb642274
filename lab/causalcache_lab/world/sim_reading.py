"""What the simulated policy reads from its prompt: plan progress from the summaries, and remembered values
from the pixels of the images present -- with the mistakes a VLM would make reading them.

Reading a remembered value (a :class:`~causalcache_lab.world.language.Need`: kind + item key):
the images are searched current screen first, then history images from the newest. An image *answers*
the need when it shows the item's key as a line (the product, the sender, the title) and a line of the
value's pattern; the last such value on it is read (the latest code of a thread). An image that shows the
pattern but not the key is a *distractor*: when no image answers, the policy is misled by the newest
distractor with probability :data:`MISLEAD` (it types that value), else it guesses.

A value that is read is *misread* with probability :func:`misread_rate`: base 0.02 on the current screen,
0.06 on a history image (prompts shrink history images to fit their token budget), +0.03 for every other
value of the same pattern on that image (crowding), +0.02 on desktop screenshots (the same glyphs are a
smaller share of a larger image), capped at 0.30. A misread picks a neighbouring same-pattern value when
the image shows several (half of the time), else changes one character.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from causalcache_lab.world.language import VALUE_KINDS, Need, PlanStep
from causalcache_lab.world.ocr import OcrResult
from causalcache_lab.world.vocab import UNDO, summary_op
from causalcache_memory.actions.model import Action

__all__ = ["MISLEAD", "PromptView", "Reading", "misread_rate", "parse_summary", "progress", "read_need"]

SUMMARY = re.compile(r"^\d+\. (\w+)(.*?)(?: \[[^\]]*\])?$")
_QUOTED = re.compile(r'"([^"]*)"')
#: probability that a same-pattern value of another item is taken for the needed one when nothing in the
#: prompt shows the needed item
MISLEAD = 0.5
_NOT_PEOPLE = {"Messages", "New", "Read", "Home", "Send", "Message"}


@dataclass(frozen=True)
class PromptView:
    """What the simulator extracted from one prompt.

    Attributes:
        step: the plan step it is on (None when the plan is finished or the goal is not in the language).
        intended: the action it means to take ``a*`` (None when the goal cannot be parsed).
        box: relative box of ``a*``'s target on screen, if any.
        known: whether ``a*``'s text is known (from the goal or an image) rather than guessed.
        alphabet: guessing alphabet for the text when not known.
        eps: the error rate of this decision (after the continuity factor).
        t: decision index (``number of summaries + 1``).
        boxes: relative boxes of all text lines on the current screen.
        size: current screen size ``(width, height)``.
        seed: the prompt-hash seed.
        evidence_event: event index of the image the (first) value was read from (0 = current screen).
        read_error: probability that the value read is wrong (misreads; 0 for literals).
    """

    step: PlanStep | None
    intended: Action | None
    box: tuple[float, float, float, float] | None
    known: bool
    alphabet: str
    eps: float
    t: int
    boxes: tuple[tuple[float, float, float, float], ...]
    size: tuple[int, int]
    seed: int
    evidence_event: int | None = None
    read_error: float = 0.0


def _matches(step: PlanStep, kind: str, rest: str) -> bool:
    quoted = _QUOTED.search(rest)
    label = quoted.group(1) if quoted else None
    if step.op == "open_app":
        return kind == "open_app" and (label or "").lower() == (step.app or "").lower()
    if step.op == "click":
        return kind == "click" and (label is None or step.label is None or label == step.label)
    if step.op == "type":
        return kind == "type"
    return kind == step.op


def parse_summary(line: str, vocab: str = "touch") -> tuple[str, str] | None:
    """``(canonical kind, rest)`` of a summary line (navigation decoded from the world's vocabulary)."""
    match = SUMMARY.match(line)
    if match is None:
        return None
    return summary_op(vocab, match.group(1), match.group(2))


def progress(plan: Sequence[PlanStep], summaries: Sequence[str], vocab: str = "touch") -> int:
    """How many plan steps the summaries show as done (matched in order; other actions are skipped).

    A ``back`` marked as an undo (:data:`~causalcache_lab.world.language.UNDO`) takes back the step
    before it: the policy found that step's tap landed on the wrong line and navigated back."""
    p = 0
    for line in summaries:
        parsed = parse_summary(line, vocab)
        if parsed is None:
            continue
        kind, rest = parsed
        if kind == "back" and f'"{UNDO}"' in rest:
            p = max(0, p - 1)
            continue
        if p < len(plan) and _matches(plan[p], kind, rest):
            p += 1
    return p


def misread_rate(history: bool, same_pattern: int, size: tuple[int, int]) -> float:
    """Probability of misreading a value (see the module docstring for the rationale of each term)."""
    rate = (
        (0.06 if history else 0.02) + 0.03 * max(0, same_pattern - 1) + (0.02 if size[0] > size[1] else 0.0)
    )
    return min(rate, 0.30)


@dataclass(frozen=True)
class Reading:
    """A value as the policy reads it: ``text`` (None = nothing to read), where, and how reliably."""

    text: str | None
    event: int | None
    error: float
    answered: bool


def _values(result: OcrResult, kind: str) -> list[str]:
    pattern = VALUE_KINDS[kind].pattern
    return [m.group(1) for line in result.lines for m in [pattern.search(line.text)] if m is not None]


def read_need(
    need: Need,
    sources: Sequence[tuple[int, OcrResult]],
    size: tuple[int, int],
    rng: random.Random,
    scale: float = 1.0,
) -> Reading:
    """Read ``need`` from ``sources`` (``(event, ocr)``, current screen = event 0 first), mistakes included."""
    distractor: tuple[int, str] | None = None
    for event, result in sources:
        values = _values(result, need.kind)
        if not values:
            continue
        if not any(line.text == need.key for line in result.lines):
            distractor = distractor or (event, values[-1])
            continue
        error = scale * misread_rate(event != 0, len(values), size)
        value = values[-1]
        if rng.random() < error:
            value = _misread(value, values, need.kind, rng)
        return Reading(value, event, error, True)
    if distractor is not None and rng.random() < MISLEAD:
        return Reading(distractor[1], distractor[0], 1.0, False)
    return Reading(None, None, 1.0, False)


def _misread(value: str, values: list[str], kind: str, rng: random.Random) -> str:
    others = [v for v in values if v != value]
    if others and rng.random() < 0.5:
        return others[-1]
    if kind in ("host", "contact"):
        return value  # a name is read whole or confused with another one, not spelled wrong
    i = rng.randrange(len(value))
    alphabet = [c for c in VALUE_KINDS[kind].alphabet if c != value[i] and c.isalnum() == value[i].isalnum()]
    return value[:i] + (rng.choice(alphabet) if alphabet else value[i]) + value[i + 1 :]


def guess_person(screen: OcrResult, rng: random.Random) -> str | None:
    """A person picked at random among the names on the current screen (when none was read)."""
    names = [ln.text for ln in screen.lines[1:] if re.fullmatch(r"[A-Z][a-z]+", ln.text)]
    names = [n for n in names if n not in _NOT_PEOPLE]
    return rng.choice(names) if names else None
