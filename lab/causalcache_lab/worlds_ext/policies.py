"""Simulated policies for the external-style worlds, with reading rules that differ from the labeller's.

The world family's :class:`~causalcache_lab.world.sim_policy.SimulatedPolicy` (the policy whose
likelihoods label the selector's training data) reads a remembered value from an image that shows the
item's key line and a line of the value's pattern, anywhere on the image. The policies here judge with
other rules, so the rule that labels is not the only rule that judges (issue 54, item 3):

=================  ===========================================================================================
policy             reading rule for ``Type the <Attr> of <Item> into <Field>``
=================  ===========================================================================================
``same-line``      the image must show ``<Item>``; a row holding the label ``<Attr>`` (or ``<Attr>: ...``) must
                   also hold a value of the field's kind *on the same row*, right of the label: that value is
                   read. A label above its value (web ``<dl>``) is not read.
``first-match``    from the first row that shows ``<Item>``, the *first* value of the field's kind at or below
                   it is read, whatever its label (another field of the same kind listed first is misread as
                   the needed one).
``noisy``          the label's row or the row below it holds the value (the labeller's reach), but reading
                   is noisy: one character is misread with probability
                   ``min(0.5, 0.02 + 0.04 [history image] + 0.001 * text elements on the image)``.
``title-line``     SEALED (never run before the final table): only an image whose title *is* ``<Item>`` is read,
                   the value on the row that starts with the label (case-insensitive).
=================  ===========================================================================================

Common to all: the images of the prompt are searched current screen first, then history screens
from the newest; the first image the rule reads from gives the value. When none does, the policy types a
guess of the right kind (it never types a value it did not read). Navigation follows the goal's plan
(:func:`~causalcache_lab.worlds_ext.tasks.parse_goal`): plan step ``t - 1`` at decision ``t``
(the action summaries in the prompt count the steps taken); a ``Select`` clicks the centre of the element
showing the label on the current screen (``wait`` when it is not there). Everything is deterministic in
``(seed, prompt)``: a policy "sees" an image by looking its SHA-256 up in the screen registry the
renderer fills (:data:`~causalcache_lab.worlds_ext.screen.REGISTRY`), as a VLM reads the pixels.

``score`` (teacher-forced likelihood) is a simple stand-in: ``log 0.9`` for the action the policy would
take, ``log 1e-3`` otherwise. These policies judge; they are not labellers.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from causalcache_lab.worlds_ext.content import FORM_FIELDS, make_value
from causalcache_lab.worlds_ext.screen import REGISTRY, Element, Screen, ScreenRegistry
from causalcache_lab.worlds_ext.tasks import PlanStep, parse_goal
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ActionParseError, PolicyError
from causalcache_memory.policy import Generation
from causalcache_memory.render.prompt import summaries_message

if TYPE_CHECKING:
    from causalcache_memory.render.messages import BoundPrompt

__all__ = [
    "POLICIES",
    "VALUE_PATTERNS",
    "ExtPolicy",
    "FirstMatchPolicy",
    "NoisyPolicy",
    "SameLinePolicy",
    "TitleLinePolicy",
    "policy",
]

#: value pattern of each needed kind (what a reader recognises as "a value of that kind")
VALUE_PATTERNS: dict[str, re.Pattern[str]] = {
    "money": re.compile(r"\$\d{1,3}(?:,\d{3})*\.\d\d"),
    "ticket": re.compile(r"INC-\d{5}"),
    "ref": re.compile(r"[A-Z]\d[A-Z]-\d{4}"),
}
_KIND_OF_FIELD = {v: k for k, v in FORM_FIELDS.items()}
_SUMMARY = re.compile(r"^\d+\. ")


@lru_cache(maxsize=4096)
def _plan(goal: str) -> tuple[PlanStep, ...] | None:
    try:
        return tuple(parse_goal(goal))
    except ValueError:
        return None


def _shows_item(screen: Screen, item: str) -> bool:
    return any(item == e.text or e.text.endswith(f" - {item}") for e in screen.elements)


def _label_at(row: Sequence[Element], attr: str) -> tuple[Element, str] | None:
    """The element of ``row`` labelled ``attr`` and the text right of the label inside it ('' if none)."""
    for e in row:
        if e.text == attr:
            return e, ""
        if e.text.startswith(f"{attr}: "):
            return e, e.text[len(attr) + 2 :]
    return None


class ExtPolicy:
    """Base class: plan following and the reading search; subclasses define :meth:`read_screen`."""

    name = "ext-policy"

    def __init__(self, seed: int = 0, registry: ScreenRegistry = REGISTRY) -> None:
        self.seed = int(seed)
        self.registry = registry

    # ------------------------------------------------------------------ the reading rule
    def read_screen(
        self, screen: Screen, item: str, attr: str, kind: str, history: bool, rng: random.Random
    ) -> str | None:
        raise NotImplementedError

    # ------------------------------------------------------------------ the prompt
    def _screens(self, prompt: BoundPrompt) -> tuple[Screen | None, list[tuple[int, Screen]]]:
        current = None
        history: list[tuple[int, Screen]] = []
        for ref in prompt.images:
            screen = self.registry.get(ref.sha256)
            if screen is None:
                continue
            if ref.role == "current":
                current = screen
            else:
                history.append((ref.event_index or 0, screen))
        history.sort(key=lambda p: -p[0])
        return current, history

    def decide(self, prompt: BoundPrompt) -> tuple[Action, int | None]:
        """The action for ``prompt`` and the event its value was read from (0 = current screen)."""
        text = summaries_message(prompt).text if len(prompt.messages) > 1 else ""
        lines = text.split("\n")
        goal = lines[0][len("Task: ") :] if lines and lines[0].startswith("Task: ") else ""
        t = sum(1 for line in lines[1:] if _SUMMARY.match(line)) + 1
        plan = _plan(goal)
        current, history = self._screens(prompt)
        if plan is None or current is None:
            raise PolicyError(
                f"{self.name}: the prompt's goal is not in the step language or its current screen was not "
                "rendered by a worlds_ext generator; these policies only run on worlds_ext tasks"
            )
        if t - 1 >= len(plan):
            return Action("done", status="success"), None
        step = plan[t - 1]
        if step.op == "open_app":
            return Action("open_app", text=step.label, target=step.label), None
        if step.op == "scroll":
            return Action("scroll", direction="down"), None
        if step.op == "done":
            return Action("done", status="success"), None
        w, h = current.size
        if step.op == "click":
            e = next((e for e in current.elements if e.text == step.label and e.on_click), None)
            if e is None:
                return Action("wait"), None
            return self._at("click", e, w, h, target=step.label), None
        fld = next((e for e in current.elements if e.on_click == f"field:{step.field}"), None)
        if fld is None:
            return Action("wait"), None
        where: int | None = None
        if step.text is not None:
            value = step.text
        else:
            assert step.need is not None
            kind = _KIND_OF_FIELD.get(step.field or "", "ref")
            seed = int.from_bytes(hashlib.sha256(repr((self.seed, goal, t)).encode()).digest()[:8], "big")
            value = None
            for j, screen in [(0, current), *history]:
                rng = random.Random(seed ^ hash_screen(screen))
                value = self.read_screen(screen, step.need.item, step.need.attr, kind, j > 0, rng)
                if value is not None:
                    where = j
                    break
            if value is None:
                value = make_value(kind, random.Random(seed))
        return self._at("type", fld, w, h, target=step.field, text=value), where

    @staticmethod
    def _at(kind: str, e: Element, w: int, h: int, **kw: str | None) -> Action:
        x0, y0, x1, y1 = e.box
        box = (x0 / w, y0 / h, x1 / w, y1 / h)
        return Action(kind, x=(x0 + x1) / 2 / w, y=(y0 + y1) / 2 / h, box=box, **kw)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ Policy protocol
    def generate(self, prompt: BoundPrompt) -> Generation:
        from causalcache_memory.actions import compose_response

        action, where = self.decide(prompt)
        current, _ = self._screens(prompt)
        size = current.size if current is not None else (1, 1)
        response = compose_response(
            f"Step with {self.name}.", action, fmt="json", screen_size=size, coords="absolute"
        )
        return Generation(response, action, meta={"simulated": True, "evidence_event": where})

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]:
        from causalcache_memory.actions import parse_action

        if len(prompts) != len(targets):
            raise PolicyError(
                f"score: got {len(prompts)} prompts but {len(targets)} targets; pass one target each"
            )
        out = []
        for prompt, target in zip(prompts, targets, strict=True):
            action, _ = self.decide(prompt)
            current, _ = self._screens(prompt)
            try:
                parsed = parse_action(target, screen_size=current.size if current else None, coords="auto")
            except (ActionParseError, ValueError):
                parsed = None
            same = parsed is not None and parsed.type == action.type and parsed.text == action.text
            out.append(math.log(0.9) if same else math.log(1e-3))
        return out


def hash_screen(screen: Screen) -> int:
    """A stable 64-bit id of a screen's content (seeds the per-image misreads)."""
    return int.from_bytes(hashlib.sha256(repr(screen.elements).encode()).digest()[:8], "big")


class SameLinePolicy(ExtPolicy):
    """Reads a value only when its label and the value share one visual row (module docstring)."""

    name = "same-line"

    def read_screen(
        self, screen: Screen, item: str, attr: str, kind: str, history: bool, rng: random.Random
    ) -> str | None:
        if not _shows_item(screen, item):
            return None
        pattern = VALUE_PATTERNS[kind]
        for row in screen.rows():
            found = _label_at(row, attr)
            if found is None:
                continue
            label, inline = found
            if m := pattern.search(inline):
                return m.group(0)
            for e in row:
                if e.box[0] > label.box[0] and (m := pattern.search(e.text)):
                    return m.group(0)
        return None


class FirstMatchPolicy(ExtPolicy):
    """Reads the first value of the needed kind at or below the item's first row, whatever its label."""

    name = "first-match"

    def read_screen(
        self, screen: Screen, item: str, attr: str, kind: str, history: bool, rng: random.Random
    ) -> str | None:
        pattern = VALUE_PATTERNS[kind]
        seen = False
        for row in screen.rows():
            seen = seen or any(item == e.text or e.text.endswith(f" - {item}") for e in row)
            if not seen:
                continue
            for e in row:
                if m := pattern.search(e.text):
                    return m.group(0)
        return None


class NoisyPolicy(ExtPolicy):
    """The labeller's reach (the label's row or the next), with misreads that grow with density."""

    name = "noisy"

    def read_screen(
        self, screen: Screen, item: str, attr: str, kind: str, history: bool, rng: random.Random
    ) -> str | None:
        if not _shows_item(screen, item):
            return None
        pattern = VALUE_PATTERNS[kind]
        rows = screen.rows()
        for i, row in enumerate(rows):
            found = _label_at(row, attr)
            if found is None:
                continue
            label, inline = found
            candidates = [inline] + [e.text for e in row if e.box[0] > label.box[0]]
            if i + 1 < len(rows):
                candidates += [e.text for e in rows[i + 1]]
            for text in candidates:
                if m := pattern.search(text):
                    return self._misread(m.group(0), screen, history, rng)
        return None

    @staticmethod
    def misread_rate(screen: Screen, history: bool) -> float:
        return min(0.5, 0.02 + 0.04 * history + 0.001 * screen.text_lines())

    def _misread(self, value: str, screen: Screen, history: bool, rng: random.Random) -> str:
        if rng.random() >= self.misread_rate(screen, history):
            return value
        digits = [i for i, c in enumerate(value) if c.isdigit()]
        i = rng.choice(digits)
        return value[:i] + str((int(value[i]) + rng.randint(1, 9)) % 10) + value[i + 1 :]


class TitleLinePolicy(ExtPolicy):
    """SEALED (docs/sealed/generators-v1.yaml): reads only from an image whose title is the item (the
    screen is *about* the item, not one that merely mentions it), the value on the label's row; the
    label is matched case-insensitively as the row's leading words."""

    name = "title-line"

    def read_screen(
        self, screen: Screen, item: str, attr: str, kind: str, history: bool, rng: random.Random
    ) -> str | None:
        if screen.title != item:
            return None
        pattern = VALUE_PATTERNS[kind]
        want = attr.lower()
        for row in screen.rows():
            text = "  ".join(e.text for e in row)
            if text.lower().lstrip("│ ").startswith(want) and (m := pattern.search(text)):
                return m.group(0)
        return None


POLICIES: dict[str, type[ExtPolicy]] = {
    "same-line": SameLinePolicy,
    "first-match": FirstMatchPolicy,
    "noisy": NoisyPolicy,
    "title-line": TitleLinePolicy,  # sealed
}


def policy(name: str, seed: int = 0) -> ExtPolicy:
    """The simulated policy called ``name`` (``same-line``, ``first-match``, ``noisy``; ``title-line`` is
    sealed) at ``seed``."""
    if name not in POLICIES:
        raise PolicyError(f"policy={name!r} is unknown; choose one of {', '.join(POLICIES)}")
    return POLICIES[name](seed=seed)
