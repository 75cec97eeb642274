"""A simulated GUI policy for the synthetic world: a CPU stand-in for a VLM, *not* a model.

It implements the :class:`~causalcache_memory.policy.Policy` protocol and reads only its prompt:

* the text: the goal (templated, parsed with :func:`~causalcache_memory.lab.world.tasks.parse_goal`) and the
  one-line action summaries, from which it infers progress (summaries are matched in order against the
  plan: ``open_app "X"``, ``click ... "Label"``, ``type``, ``back``, ``home``, ``scroll``; a click summary
  without a label is taken as the planned click);
* the pixels of the images present, read with the world's exact OCR (:mod:`~causalcache_memory.lab.world.ocr`),
  cached per screenshot hash.

Decision rule for plan step ``P_p`` on the current screen: ``open_app``/``back``/``home``/``scroll``/
``done`` are emitted as planned; ``tap L`` clicks the centre of the OCR line ``L`` (if ``L`` is not on
screen: ``open_app`` the step's app when the title bar shows another app, else ``back``);
``type ... into F`` types at field ``F``. A literal text comes from the goal; a *remembered value* is
searched with the value kind's pattern in the current screen, then in the history images from the most
recent event back (last match in an image wins). If no image in the prompt shows it, the simulator
cannot know it and types a plausible guess drawn from a prompt-hash seed.

Imperfection (deterministic, seeded by a hash of the whole prompt): a planned tap lands on a
neighbouring text line with probability ``eps_click + eps_ground`` -- visibly (the action names what it
hit; the policy notices from the summary and recovers with ``back``) or, with the ``eps_ground`` share,
as an unnoticed grounding slip (the action still names the intended label, the plan moves on, and the
episode usually fails) -- and a planned ``open_app`` opens another app with probability ``eps_app``.
Continuity: seeing the latest screens helps navigation, so these rates are multiplied by
``1 - relief[0] * [v_{t-1} in prompt] - relief[1] * [v_{t-2} in prompt]`` (defaults 0.10 and 0.05).

``score`` is a proper mean per-token log-likelihood of a target response under the simulator's action
distribution. The target is parsed into an action and tokenized as: the action type (1 token), the
pointer ``x`` and ``y`` (1 token each, when present), the typed/opened text (1 token per character plus
an end token). With ``c = 1 - eps`` the confidence of the intended action ``a*``:

* type token: ``log(c + eps/8)`` if it matches ``a*``, else ``log(eps/8)``;
* each coordinate: ``log(1 - e)`` inside ``a*``'s box (grown by half a cell), ``log(e/n)`` inside one of
  the ``n`` other text boxes, ``log 1e-3`` elsewhere, with ``e = clip(eps, 0.02, 0.5)`` (so the
  continuity relief shows in the coordinates too);
* text characters when the intended text is known (goal, or readable in an image): ``log 0.97`` for
  the right character, ``log(0.03/|Sigma|)`` otherwise; when the value is *not* readable: ``log(1/|Sigma|)``
  for characters of the value kind's alphabet ``Sigma``, ``log 1e-4`` otherwise. So a remembered value
  scores high only when its evidence screenshot is in the prompt.

The thought before ``Action:`` is not scored (it is free text in every response). Results are cached
per ``(prompt, target)``; the prompt analysis is cached per prompt content.
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ActionParseError, PolicyError
from causalcache_memory.lab.world.apps import APPS
from causalcache_memory.lab.world.font import CELL_H, CELL_W
from causalcache_memory.lab.world.ocr import OcrCache, OcrLine, OcrResult
from causalcache_memory.lab.world.tasks import VALUE_KINDS, PlanStep, parse_goal
from causalcache_memory.policy import Generation

if TYPE_CHECKING:
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["PromptView", "SimulatedPolicy"]

_SUMMARY = re.compile(r"^\d+\. (\w+)(.*?)(?: \[[^\]]*\])?$")
_QUOTED = re.compile(r'"([^"]*)"')
_N_TYPES = 8
_LOG_MISS = math.log(1e-3)


@dataclass(frozen=True)
class PromptView:
    """What the simulator extracted from one prompt.

    Attributes:
        t: decision index (``number of summaries + 1``).
        step: the plan step it is on (None when the plan is finished or the goal is not templated).
        intended: the noise-free action ``a*`` (None when the goal cannot be parsed).
        box: relative box of ``a*``'s target on screen, if any.
        known: whether ``a*``'s text is known (from the goal or an image) rather than guessed.
        alphabet: guessing alphabet for the text when not known.
        eps: the error rate of this decision (after the continuity relief).
        boxes: relative boxes of all text lines on the current screen.
        size: current screen size ``(width, height)``.
        seed: the prompt-hash seed.
        evidence_event: event index of the history image the value was read from (0 = current screen).
    """

    t: int
    step: PlanStep | None
    intended: Action | None
    box: tuple[float, float, float, float] | None
    known: bool
    alphabet: str
    eps: float
    boxes: tuple[tuple[float, float, float, float], ...]
    size: tuple[int, int]
    seed: int
    evidence_event: int | None = None


@lru_cache(maxsize=1024)
def _plan(goal: str) -> tuple[PlanStep, ...] | None:
    try:
        return parse_goal(goal)
    except ValueError:
        return None


def _matches(step: PlanStep, kind: str, rest: str) -> bool:
    quoted = _QUOTED.search(rest)
    label = quoted.group(1) if quoted else None
    if step.op == "open_app":
        return kind == "open_app" and (label or "").lower() == (step.app or "").lower()
    if step.op == "click":
        return kind == "click" and (label is None or label == step.label)
    if step.op == "type":
        return kind == "type"
    return kind == step.op


def _progress(plan: Sequence[PlanStep], summaries: Sequence[str]) -> int:
    p = 0
    for line in summaries:
        match = _SUMMARY.match(line)
        if match is None or p >= len(plan):
            continue
        if _matches(plan[p], match.group(1), match.group(2)):
            p += 1
    return p


def _grow(box: tuple[float, float, float, float], size: tuple[int, int]) -> tuple[float, float, float, float]:
    dx, dy = CELL_W / 2 / size[0], CELL_H / 2 / size[1]
    return box[0] - dx, box[1] - dy, box[2] + dx, box[3] + dy


def _inside(box: tuple[float, float, float, float], x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


class SimulatedPolicy:
    """Deterministic simulated policy for the synthetic world (see the module docstring).

    Args:
        seed: mixes into every prompt-hash seed (different seeds = different but fixed mistakes).
        eps_click: base probability that a planned tap visibly hits another text line (the action names
            what it hit, so the summary shows the slip and the policy recovers).
        eps_ground: base probability of an unnoticed grounding slip: the tap lands on another line but
            the policy believes it hit the intended label (the summary names the intended label), which
            usually makes the episode fail.
        eps_app: base probability that a planned ``open_app`` opens another app.
        relief: continuity weights for ``v_{t-1}`` and ``v_{t-2}`` being in the prompt.
        cache_size: entries of the prompt, score and OCR caches.
    """

    name = "simulated-world-policy"

    def __init__(
        self,
        seed: int = 0,
        *,
        eps_click: float = 0.05,
        eps_ground: float = 0.05,
        eps_app: float = 0.03,
        relief: tuple[float, float] = (0.10, 0.05),
        cache_size: int = 65536,
    ) -> None:
        self.seed = int(seed)
        self.eps_click = float(eps_click)
        self.eps_ground = float(eps_ground)
        self.eps_app = float(eps_app)
        self.relief = (float(relief[0]), float(relief[1]))
        self.ocr = OcrCache(maxsize=4096)
        self._views: OrderedDict[tuple, PromptView] = OrderedDict()
        self._scores: OrderedDict[tuple, float] = OrderedDict()
        self._targets: dict[tuple[str, tuple[int, int]], Action | None] = {}
        self.cache_size = int(cache_size)

    # ------------------------------------------------------------------ reading the prompt
    @staticmethod
    def _key(prompt: BoundPrompt) -> tuple:
        return (
            tuple(m.text for m in prompt.messages),
            tuple((r.role, r.sha256, r.event_index) for r in prompt.images),
        )

    def _read(self, prompt: BoundPrompt, i: int) -> OcrResult:
        return self.ocr.get(prompt.images[i].sha256, lambda: prompt.image_bytes(i))

    def view(self, prompt: BoundPrompt) -> PromptView:
        """The (cached) analysis of ``prompt``."""
        key = self._key(prompt)
        found = self._views.get(key)
        if found is not None:
            return found
        view = self._analyze(prompt, key)
        self._views[key] = view
        if len(self._views) > self.cache_size:
            self._views.popitem(last=False)
        return view

    def _analyze(self, prompt: BoundPrompt, key: tuple) -> PromptView:
        digest = hashlib.sha256(repr((self.seed, key)).encode()).digest()
        seed = int.from_bytes(digest[:8], "big")
        lines = prompt.messages[1].text.split("\n") if len(prompt.messages) > 1 else []
        goal = lines[0][len("Task: ") :] if lines and lines[0].startswith("Task: ") else ""
        summaries = [s for s in lines[1:] if _SUMMARY.match(s)]
        t = len(summaries) + 1
        current_index = max(i for i, r in enumerate(prompt.images) if r.role == "current")
        screen = self._read(prompt, current_index)
        history = sorted(
            ((r.event_index or 0, i) for i, r in enumerate(prompt.images) if r.role == "history"),
            reverse=True,
        )
        present = {j for j, _ in history}
        relief = 1.0 - self.relief[0] * ((t - 1) in present) - self.relief[1] * ((t - 2) in present)
        boxes = tuple(line.box_rel for line in screen.lines)
        plan = _plan(goal)
        base = dict(t=t, boxes=boxes, size=screen.size, seed=seed)
        if plan is None:
            return PromptView(step=None, intended=None, box=None, known=True, alphabet="", eps=0.02, **base)
        p = _progress(plan, summaries)
        if p >= len(plan):
            return PromptView(
                step=None,
                intended=Action("done", status="success"),
                box=None,
                known=True,
                alphabet="",
                eps=0.02,
                **base,
            )
        step = plan[p]
        if step.op == "open_app":
            return PromptView(
                step=step,
                intended=Action("open_app", text=step.app, target=step.app),
                box=None,
                known=True,
                alphabet="",
                eps=self.eps_app * relief,
                **base,
            )
        if step.op in ("click", "type"):
            line = screen.find(step.label or "")
            if line is None:
                return self._recover(step, screen, base)
            if step.op == "click":
                action = Action(
                    "click", x=line.center_rel[0], y=line.center_rel[1], target=step.label, box=line.box_rel
                )
                return PromptView(
                    step=step,
                    intended=action,
                    box=line.box_rel,
                    known=True,
                    alphabet="",
                    eps=(self.eps_click + self.eps_ground) * relief,
                    **base,
                )
            text, known, where, alphabet = self._value(step, prompt, screen, history, seed)
            action = Action(
                "type",
                x=line.center_rel[0],
                y=line.center_rel[1],
                text=text,
                target=step.label,
                box=line.box_rel,
            )
            return PromptView(
                step=step,
                intended=action,
                box=line.box_rel,
                known=known,
                alphabet=alphabet,
                eps=0.02,
                evidence_event=where,
                **base,
            )
        if step.op == "done":
            action = Action("done", status="success")
        elif step.op == "scroll":
            action = Action("scroll", direction="down")
        else:
            action = Action(step.op)  # type: ignore[arg-type]
        return PromptView(step=step, intended=action, box=None, known=True, alphabet="", eps=0.02, **base)

    @staticmethod
    def _recover(step: PlanStep, screen: OcrResult, base: dict) -> PromptView:
        title = screen.lines[0].text if screen.lines else ""
        if step.app is not None and title != step.app:
            action = Action("open_app", text=step.app, target=step.app)
        else:
            action = Action("back")
        return PromptView(step=step, intended=action, box=None, known=True, alphabet="", eps=0.02, **base)

    def _value(
        self,
        step: PlanStep,
        prompt: BoundPrompt,
        screen: OcrResult,
        history: list[tuple[int, int]],
        seed: int,
    ) -> tuple[str, bool, int | None, str]:
        """``(text, known, event the value was read from, guessing alphabet)`` for a type step."""
        if step.text is not None:
            return step.text, True, None, ""
        kind = VALUE_KINDS[step.value_kind or "order"]
        sources = [(0, screen)] + [(j, self._read(prompt, i)) for j, i in history]
        for event, result in sources:
            matches = list(result.search(kind.pattern))
            if matches:
                return matches[-1].group(1), True, event, kind.alphabet
        return kind.guess(random.Random(seed)), False, None, kind.alphabet

    # ------------------------------------------------------------------ Policy protocol
    def decide(self, prompt: BoundPrompt) -> tuple[str, Action]:
        """Greedy (deterministic) response and action for ``prompt``, mistakes included."""
        view = self.view(prompt)
        action = view.intended or Action("done", status="failure")
        rng = random.Random(view.seed ^ 0x5EED)
        draw = rng.random()
        if action.type == "click" and draw < view.eps:
            wrong = _misclick_target(self._read(prompt, len(prompt.images) - 1), view, rng)
            if wrong is not None:
                # a grounding slip keeps the intended label (the policy believes it hit it); a visible
                # misclick names what was hit
                unnoticed = draw < view.eps * self.eps_ground / (self.eps_ground + self.eps_click)
                action = Action(
                    "click",
                    x=wrong.center_rel[0],
                    y=wrong.center_rel[1],
                    target=action.target if unnoticed else wrong.text,
                    box=wrong.box_rel,
                )
        elif (
            action.type == "open_app"
            and view.step is not None
            and view.step.op == "open_app"
            and draw < view.eps
        ):
            apps = [a for a in APPS if a != action.text]
            wrong_app = apps[rng.randrange(len(apps))]
            action = Action("open_app", text=wrong_app, target=wrong_app)
        thought = _thought(view, action)
        from causalcache_memory.lab.world.expert import respond

        return respond(thought, action, view.size), action

    def generate(self, prompt: BoundPrompt) -> Generation:
        response, action = self.decide(prompt)
        view = self.view(prompt)
        return Generation(
            response,
            action,
            meta={"simulated": True, "t": view.t, "known": view.known, "evidence_event": view.evidence_event},
        )

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]:
        if len(prompts) != len(targets):
            raise PolicyError(
                f"score: got {len(prompts)} prompts but {len(targets)} targets; pass one target each"
            )
        out: list[float] = []
        for prompt, target in zip(prompts, targets, strict=False):
            key = (self._key(prompt), target)
            found = self._scores.get(key)
            if found is None:
                found = self._score_one(self.view(prompt), target)
                self._scores[key] = found
                if len(self._scores) > self.cache_size:
                    self._scores.popitem(last=False)
            out.append(found)
        return out

    # ------------------------------------------------------------------ scoring
    def _parse(self, target: str, size: tuple[int, int]) -> Action | None:
        key = (target, size)
        if key not in self._targets:
            from causalcache_memory.actions import parse_action

            try:
                self._targets[key] = parse_action(target, screen_size=size, coords="auto")
            except (ActionParseError, ValueError):
                self._targets[key] = None
        return self._targets[key]

    def _score_one(self, view: PromptView, target: str) -> float:
        action = self._parse(target, view.size)
        if action is None:
            return math.log(1e-6)
        intended = view.intended or Action("done", status="failure")
        eps = min(max(view.eps, 1e-4), 0.5)
        conf = 1.0 - eps
        logps = [
            math.log(conf + eps / _N_TYPES) if action.type == intended.type else math.log(eps / _N_TYPES)
        ]
        if action.x is not None and action.y is not None:
            for _ in (0, 1):
                logps.append(self._point_logp(view, action.x, action.y, intended))
        text = action.text if action.type in ("type", "open_app", "answer") else None
        if text is not None:
            logps.extend(_text_logps(view, text, intended.text if intended.type == action.type else None))
        return sum(logps) / len(logps)

    @staticmethod
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
        wrong = math.log(0.03 / sigma)
        out = [
            math.log(0.97) if i < len(intended) and ch == intended[i] else wrong for i, ch in enumerate(text)
        ]
        out.append(math.log(0.97) if len(text) == len(intended) else math.log(0.03))
        return out
    alphabet = set(view.alphabet)
    uniform = math.log(1.0 / max(1, len(alphabet)))
    out = [uniform if ch in alphabet else math.log(1e-4) for ch in text]
    out.append(math.log(0.5))
    return out


def _misclick_target(screen: OcrResult, view: PromptView, rng: random.Random) -> OcrLine | None:
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


def _thought(view: PromptView, action: Action) -> str:
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


def policy_from_config(config: PolicyConfig) -> SimulatedPolicy:
    """The runtime registered as ``simulated``: the synthetic world's CPU stand-in (demo and tests)."""
    return SimulatedPolicy(seed=config.simulated.seed)
