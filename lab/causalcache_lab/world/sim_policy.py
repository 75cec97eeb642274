"""A simulated GUI policy for the synthetic world: a CPU stand-in for a VLM, *not* a model.

It implements the :class:`~causalcache_memory.policy.Policy` protocol and reads only its prompt:

* the text: the goal (intent sentences, planned with
  :func:`~causalcache_lab.world.language.plan_goal` -- the world knowledge a VLM brings) and the
  one-line action summaries, from which it infers progress
  (:func:`~causalcache_lab.world.sim_reading.progress`);
* the pixels of the images present, read with the world's exact OCR (cached per screenshot hash), and
  then *interpreted* with a VLM's mistakes (:mod:`~causalcache_lab.world.sim_reading`: keyed
  reading, distractors that mislead, misreads that grow with crowding, history downscaling and desktop
  size).

Decision rule for plan step ``P_p`` on the current screen: ``open_app``/``back``/``home``/``scroll``/
``done`` are emitted as planned; ``tap L`` clicks the centre of the OCR line ``L`` (if ``L`` is not on
screen: ``open_app`` the step's app when the title bar shows another app, else ``back``); a tap on a
remembered person taps the name read from an image (or a random name on screen when none is readable);
``type ... into F`` types at field ``F`` the literal from the goal or the remembered values read from the
images (a guess of the right shape when no image shows them).

Slips (deterministic, seeded by a hash of the whole prompt and ``seed``), on every action type: a planned
tap lands on a neighbouring text line with probability ``eps_click + eps_ground`` -- visibly (the action
names what it hit; the policy recovers) or, for the ``eps_ground`` share, unnoticed (the summary names the
intended label; the episode usually fails); a planned ``open_app`` opens another app with probability
``eps_app``; a ``type`` has one wrong character with probability ``eps_type``; ``back``/``home``/``scroll``
become a no-op ``wait`` with probability ``eps_nav``. Continuity: without the latest screens the policy
loses track of the local state, so these rates are multiplied by
``1 + continuity[0] * [v_{t-1} not in prompt] + continuity[1] * [v_{t-2} not in prompt]``.

``score`` is a proper mean per-token log-likelihood of a target response under the simulator's action
distribution (:mod:`~causalcache_lab.world.sim_scoring`). The thought before ``Action:`` is not
scored. Results are cached per ``(prompt, target)``; the prompt analysis is cached per prompt content.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING

from causalcache_lab.world.language import VALUE_KINDS, PlanStep, plan_goal
from causalcache_lab.world.ocr import OcrCache, OcrResult
from causalcache_lab.world.render import ACCENTS
from causalcache_lab.world.sim_reading import (
    SUMMARY,
    PromptView,
    guess_person,
    parse_summary,
    progress,
    read_need,
)
from causalcache_lab.world.sim_scoring import misclick_target, score_action, thought, typo
from causalcache_lab.world.vocab import UNDO, VOCABS, encode
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ActionParseError, PolicyError
from causalcache_memory.policy import Generation
from causalcache_memory.render.prompt import summaries_message

if TYPE_CHECKING:
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["BLIND_NOTICE", "PromptView", "SimulatedPolicy"]

#: probability of noticing a slip of the previous action from the current screen alone (family worlds)
BLIND_NOTICE = 0.25
_NAV = ("open_app", "back", "home")
_POINT = re.compile(r"\((\d+), (\d+)\)")
_QUOTED_LABEL = re.compile(r'"([^"]*)"')


def _inside(box: tuple[float, float, float, float], x: float, y: float) -> bool:
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


@lru_cache(maxsize=1024)
def _plan(goal: str) -> tuple[PlanStep, ...] | None:
    try:
        return plan_goal(goal)
    except ValueError:
        return None


class SimulatedPolicy:
    """Deterministic simulated policy for the synthetic world (see the module docstring).

    Args:
        seed: mixes into every prompt-hash seed (different seeds = different but fixed mistakes).
        eps_click: probability that a planned tap visibly hits another text line.
        eps_ground: probability of an unnoticed grounding slip (the tap lands elsewhere, the policy
            believes it hit the intended label).
        eps_app: probability that a planned ``open_app`` opens another app.
        eps_type: probability that a ``type`` action has one wrong character.
        eps_nav: probability that ``back``/``home``/``scroll`` is lost (a no-op ``wait``).
        continuity: factors for ``v_{t-1}`` and ``v_{t-2}`` missing from the prompt.
        misread_scale: multiplies every misread rate (0 = perfect reading, for mechanism tests).
        cache_size: entries of the prompt, score and OCR caches.
        vocab: the world's action vocabulary (the action vocabularies of :mod:`~causalcache_lab.world.language`), as a VLM is
            told its action space.
        recency: the recency mechanisms of family worlds (check that the previous action took effect,
            redo or undo; docs/WORLD.md). Off = v2's policy.
        blind_notice: with ``recency``, probability of noticing a slip from the current screen alone
            (without the screen the action was taken on).
    """

    name = "simulated-world-policy"

    def __init__(
        self,
        seed: int = 0,
        *,
        eps_click: float = 0.03,
        eps_ground: float = 0.02,
        eps_app: float = 0.02,
        eps_type: float = 0.02,
        eps_nav: float = 0.01,
        continuity: tuple[float, float] = (0.5, 0.25),
        misread_scale: float = 1.0,
        cache_size: int = 65536,
        vocab: str = "touch",
        recency: bool = False,
        blind_notice: float = BLIND_NOTICE,
    ) -> None:
        self.seed = int(seed)
        self.eps_click, self.eps_ground, self.eps_app = float(eps_click), float(eps_ground), float(eps_app)
        self.eps_type, self.eps_nav = float(eps_type), float(eps_nav)
        self.continuity = (float(continuity[0]), float(continuity[1]))
        self.misread_scale = float(misread_scale)
        if vocab not in VOCABS:
            raise PolicyError(f"vocab={vocab!r} must be one of {', '.join(VOCABS)}")
        self.vocab, self.recency, self.blind_notice = vocab, bool(recency), float(blind_notice)
        self.ocr = OcrCache(maxsize=4096)
        self._views: OrderedDict[tuple, PromptView] = OrderedDict()
        self._scores: OrderedDict[tuple, float] = OrderedDict()
        self._targets: dict[tuple[str, tuple[int, int]], Action | None] = {}
        self.cache_size = int(cache_size)

    # ------------------------------------------------------------------ reading the prompt
    @staticmethod
    def _key(prompt: BoundPrompt) -> tuple:
        # the paper's message order whatever the layout (render.layout): the same content draws the same
        # noise, so a layout changes what the policy reads only through what it shows, not its seed
        texts = [m.text for m in prompt.messages]
        at = getattr(getattr(prompt, "prompt", None), "meta", {}).get("summaries_message", 1)
        if isinstance(at, int) and 1 < at < len(texts):
            texts.insert(1, texts.pop(at))
        return (
            tuple(texts),
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
        seed = int.from_bytes(hashlib.sha256(repr((self.seed, key)).encode()).digest()[:8], "big")
        lines = summaries_message(prompt).text.split("\n") if len(prompt.messages) > 1 else []
        goal = lines[0][len("Task: ") :] if lines and lines[0].startswith("Task: ") else ""
        summaries = [s for s in lines[1:] if SUMMARY.match(s)]
        t = len(summaries) + 1
        current = max(i for i, r in enumerate(prompt.images) if r.role == "current")
        screen = self._read(prompt, current)
        history = sorted(
            ((r.event_index or 0, i) for i, r in enumerate(prompt.images) if r.role == "history"),
            reverse=True,
        )
        present = {j for j, _ in history}
        shown_as_current = getattr(getattr(prompt, "prompt", prompt), "meta", {}).get("current_event")
        if shown_as_current is not None:  # the conversation layout sends v_{t-1} once, as the current screen
            present.add(int(shown_as_current))
        factor = (
            1.0
            + self.continuity[0] * ((t - 1) not in present)
            + self.continuity[1] * ((t - 2) not in present)
        )
        base = dict(t=t, boxes=tuple(line.box_rel for line in screen.lines), size=screen.size, seed=seed)
        plain = dict(box=None, known=True, alphabet="", eps=0.02 * factor, **base)
        plan = _plan(goal)
        if plan is None:
            return PromptView(step=None, intended=None, **plain)
        p = progress(plan, summaries, self.vocab)
        if self.recency and t >= 3:
            check = self._check_previous(prompt, plan, summaries, p, screen, present, seed)
            if check == "undo":
                action = encode(self.vocab, "back", target=UNDO)
                return PromptView(step=None, intended=action, **{**plain, "eps": self.eps_nav * factor})
            if check == "redo":
                p -= 1
        if p >= len(plan):
            return PromptView(step=None, intended=Action("done", status="success"), **plain)
        step = plan[p]
        if step.op == "open_app":
            action = encode(self.vocab, "open_app", step.app)
            return PromptView(step=step, intended=action, **{**plain, "eps": self.eps_app * factor})
        if step.op not in ("click", "type"):
            op = {"done": Action("done", status="success"), "scroll": Action("scroll", direction="down")}
            action = op.get(step.op) or encode(self.vocab, step.op)
            return PromptView(step=step, intended=action, **{**plain, "eps": self.eps_nav * factor})
        sources = [(0, screen)] + [(j, self._read(prompt, i)) for j, i in history]
        return self._act_on_screen(step, screen, sources, base, factor)

    def _check_previous(
        self,
        prompt: BoundPrompt,
        plan: Sequence[PlanStep],
        summaries: Sequence[str],
        p: int,
        screen: OcrResult,
        present: set[int],
        seed: int,
    ) -> str | None:
        """Did the previous action (a tap or typing the plan counted as done) take effect?

        Returns ``"redo"`` (it did nothing: a missed tap, a keyboard that did not open), ``"undo"`` (a tap
        landed on another line and navigated) or None. With the screen the action was taken on
        (``v_{t-2}``) in the prompt the check compares it with the current screen and reads which line the
        tap's point was on; without it the policy notices a slip visible on the current screen only with
        probability ``blind_notice``."""
        parsed = parse_summary(summaries[-1], self.vocab)
        if parsed is None or parsed[0] not in ("click", "type"):
            return None
        if p == 0 or progress(plan, summaries[:-1], self.vocab) != p - 1:
            return None  # the previous action was not a counted plan step (a redo, a recovery)
        step, t = plan[p - 1], len(summaries) + 1
        if (t - 2) in present:
            index = next(
                i for i, r in enumerate(prompt.images) if r.role == "history" and r.event_index == t - 2
            )
            before = self._read(prompt, index)
            if [ln.text for ln in before.lines] == [ln.text for ln in screen.lines]:
                return "redo"
            point = _POINT.search(parsed[1])
            quoted = _QUOTED_LABEL.search(parsed[1])
            if parsed[0] == "click" and step.push and point and quoted:
                w, h = before.size
                x, y = int(point.group(1)) / max(1, w - 1), int(point.group(2)) / max(1, h - 1)
                line = next((ln for ln in before.lines if _inside(ln.box_rel, x, y)), None)
                if line is not None and line.text != quoted.group(1):
                    return "undo"
            return None
        if random.Random(seed ^ 0xB11D).random() >= self.blind_notice:
            return None
        texts = [ln.text for ln in screen.lines]
        if parsed[0] == "type":  # the field still shows its placeholder
            return "redo" if step.label is not None and step.label in texts else None
        quoted = _QUOTED_LABEL.search(parsed[1])
        if not step.push or quoted is None:
            return None
        label = quoted.group(1)
        bar_bottom = 3 * 16  # the title bar's three cell rows
        title = next((ln.text for ln in screen.lines if ln.box_px[1] >= bar_bottom), "")
        if title and (title == label or label.startswith(title + " ")):
            return None  # the screen the tap was meant to open
        return "redo" if label in texts else "undo"

    def _act_on_screen(
        self,
        step: PlanStep,
        screen: OcrResult,
        sources: Sequence[tuple[int, OcrResult]],
        base: dict,
        factor: float,
    ) -> PromptView:
        rng = random.Random(base["seed"] ^ 0xA11CE)
        readings = [read_need(need, sources, screen.size, rng, self.misread_scale) for need in step.needs]
        label = step.label
        if step.op == "click" and label is None:  # tap the remembered person
            label = readings[0].text if readings and readings[0].text else guess_person(screen, rng)
        line = screen.find(label or "")
        if line is None:
            return self._recover(step, screen, base)
        known = all(r.answered for r in readings)
        where = readings[0].event if readings else None
        error = max((r.error for r in readings), default=0.0)
        if step.op == "click":
            action = Action(
                "click", x=line.center_rel[0], y=line.center_rel[1], target=label, box=line.box_rel
            )
            eps = (self.eps_click + self.eps_ground) * factor
            return PromptView(
                step, action, line.box_rel, known, "", eps, evidence_event=where, read_error=error, **base
            )
        if step.text is not None:
            text, alphabet = step.text, ""
        else:
            kind = VALUE_KINDS[step.needs[0].kind]
            parts = [
                r.text or VALUE_KINDS[n.kind].guess(rng) for r, n in zip(readings, step.needs, strict=True)
            ]
            text, alphabet = " ".join(parts), kind.alphabet
        action = Action(
            "type", x=line.center_rel[0], y=line.center_rel[1], text=text, target=step.label, box=line.box_rel
        )
        eps = self.eps_type * factor
        return PromptView(
            step, action, line.box_rel, known, alphabet, eps, evidence_event=where, read_error=error, **base
        )

    def _recover(self, step: PlanStep, screen: OcrResult, base: dict) -> PromptView:
        title = screen.lines[0].text if screen.lines else ""
        if step.app is not None and title != step.app:
            action = encode(self.vocab, "open_app", step.app)
        else:
            action = encode(self.vocab, "back")
        return PromptView(step, action, None, True, "", 0.02, **base)

    # ------------------------------------------------------------------ Policy protocol
    def decide(self, prompt: BoundPrompt) -> tuple[str, Action]:
        """Greedy (deterministic) response and action for ``prompt``, slips included."""
        view = self.view(prompt)
        action = view.intended or Action("done", status="failure")
        rng = random.Random(view.seed ^ 0x5EED)
        draw = rng.random()
        planned = view.step is not None and (
            view.step.op == action.type or (self.vocab != "touch" and view.step.op in _NAV)
        )
        if action.type == "click" and draw < view.eps:
            wrong = misclick_target(self._read(prompt, len(prompt.images) - 1), view, rng)
            if wrong is not None:
                # a grounding slip keeps the intended label (the policy believes it hit it); a visible
                # misclick names what was hit
                unnoticed = self.recency or draw < view.eps * self.eps_ground / (
                    self.eps_ground + self.eps_click
                )
                target = action.target if unnoticed else wrong.text
                action = Action(
                    "click", x=wrong.center_rel[0], y=wrong.center_rel[1], target=target, box=wrong.box_rel
                )
        elif view.step is not None and view.step.op == "open_app" and planned and draw < view.eps:
            apps = [a for a in ACCENTS if a != view.step.app]
            wrong_app = apps[rng.randrange(len(apps))]
            action = encode(self.vocab, "open_app", wrong_app)
        elif action.type == "type" and action.x is not None and draw < view.eps:
            action = Action(
                "type",
                x=action.x,
                y=action.y,
                text=typo(action.text or "", rng),
                target=action.target,
                box=action.box,
            )
        elif (
            view.step is not None
            and view.step.op in ("back", "home", "scroll")
            and planned
            and draw < view.eps
        ):
            action = Action("wait")
        from causalcache_memory.actions import compose_response

        response = compose_response(
            thought(action), action, fmt="json", screen_size=view.size, coords="absolute"
        )
        return response, action

    def generate(self, prompt: BoundPrompt) -> Generation:
        response, action = self.decide(prompt)
        view = self.view(prompt)
        meta = {"simulated": True, "t": view.t, "known": view.known, "evidence_event": view.evidence_event}
        return Generation(response, action, meta=meta)

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
                view = self.view(prompt)
                found = score_action(view, self._parse(target, view.size))
                self._scores[key] = found
                if len(self._scores) > self.cache_size:
                    self._scores.popitem(last=False)
            out.append(found)
        return out

    def _parse(self, target: str, size: tuple[int, int]) -> Action | None:
        key = (target, size)
        if key not in self._targets:
            from causalcache_memory.actions import parse_action

            try:
                self._targets[key] = parse_action(target, screen_size=size, coords="auto")
            except (ActionParseError, ValueError):
                self._targets[key] = None
        return self._targets[key]


def policy_from_config(config: PolicyConfig) -> SimulatedPolicy:
    """The runtime registered as ``simulated``: the synthetic world's CPU stand-in (demo and tests)."""
    return SimulatedPolicy(seed=config.simulated.seed)
