"""Cheaper selector labels: a prompt cap per decision state (issue 25, "Cheaper labels, same quality").

Full labelling (:func:`~causalcache_lab.selector.labels.label_state`) scores, per ``(state, B)``,
``1 + B·D + path`` complete prompts (``D`` = distant events): about 60 at ``B = 4, t = 20``. The capped
labeller scores a subset of the *same* prompts, chosen by a cheap prior, under a hard cap:

* **anchor** ``Q(Recent-B)`` (1 prompt);
* **slots oldest first**: swaps out of the oldest recent slot first (the paper's single-slot
  replacement), then out of the next oldest while the cap allows (``slots``: at most that many slots;
  None, the default, = every slot the cap leaves room for; 1 = single-slot replacement only);
* **candidate pruning**: per slot, the ``candidates`` distant events ranked highest by the prior, plus
  ``explore`` events drawn uniformly from the rest (deterministic, seeded by the state key) so the
  scorer also sees low-prior events with their true (usually zero or negative) utilities;
* **early-stopped teacher path**: from the best single swap, each further step swaps out the oldest
  recent slot still in the set for the ``path_candidates`` best-scored candidates not in it, and is tried
  only while the best remaining candidate's prior exceeds ``path_min_prior`` and prompts remain;
* **cap**: at most ``max_prompts`` prompts per state, whatever the other settings (later candidates and
  path steps are cut first).

Every set utility is still a fresh full-set score ``Q(S)`` (the same :class:`_SetScorer`), so each prompt
the capped labeller scores has exactly the utility full labelling gives that set; its singleton groups
are subsets of full labelling's singleton groups.

Priors (``prior``), each returning ``p_j`` for events ``j = 1..t-1`` (NaN = unavailable, "masked"):

* ``screen_text``: text relevance of event ``j``'s screen to the decision. With ``W_j`` the words of the
  screen text (the archive's stored text, :meth:`ScreenshotArchive.get_text`, else the optional ``ocr``
  function; the synthetic world's exact OCR for world data), ``G`` the words of the goal and ``A`` those of
  the target action's text, and ``idf(w) = log((n + 1) / (df(w) + 1))`` over the ``n`` history screens,
  ``p_j = Σ_{w ∈ W_j ∩ (G ∪ A)} idf(w) · (2 if w ∈ A else 1)``;
* ``selector``: a trained selector's predicted gain of swapping the oldest recent slot for ``j``,
  ``Δ̂(j | Recent-B \\ {r}) - Δ̂(r | Recent-B \\ {r})`` (the bundled model by default, gold witness).

A state whose prior is unavailable for any distant event (no text stored and no OCR, an unreadable
screenshot) **falls back to full labelling** (record field ``prompt_cap.fallback``); such states are not
capped. :func:`~causalcache_lab.selector.labels.label_state` runs this labeller when
``LabelConfig.prompt_cap`` is set.
"""

from __future__ import annotations

import hashlib
import logging
import math
import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from causalcache_memory.allocation.base import recent_b

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.trace import Trace

__all__ = [
    "CandidatePrior",
    "PromptCap",
    "RawGroup",
    "ScreenTextPrior",
    "SelectorPrior",
    "SetScore",
    "capped_labels",
    "label_capped",
    "make_prior",
    "path_step",
    "world_ocr_text",
]

logger = logging.getLogger(__name__)


class PromptCap(BaseModel):
    """The prompt cap of one labelled ``(state, B)`` (see module doc).

    Attributes:
        prior: ``screen_text`` or ``selector``.
        text: where ``screen_text`` reads a screen's words: ``archive`` (text stored with the screenshot
            only) or ``world_ocr`` (stored text, else the synthetic world's exact OCR).
        candidates: distant events kept per labelled slot, best prior first.
        explore: extra distant events per slot drawn uniformly from the rest (seeded by the state key).
        slots: at most this many recent slots labelled, oldest first (None = as many as the cap allows;
            1 = the paper's single-slot replacement).
        path_length: maximum swaps on the teacher path (capped at ``B``; 0 = no path).
        path_candidates: candidates tried at each further path step.
        path_min_prior: a further path step runs only while its best candidate's prior exceeds this.
        max_prompts: hard cap on prompts scored per state (the anchor included).
        selector_model: model directory of the ``selector`` prior (None = the bundled model).
        seed: seeds the ``explore`` draws.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    prior: Literal["screen_text", "selector"] = "screen_text"
    text: Literal["archive", "world_ocr"] = "archive"
    candidates: int = Field(6, ge=1)
    explore: int = Field(1, ge=0)
    slots: int | None = Field(None, ge=1)
    path_length: int = Field(2, ge=0)
    path_candidates: int = Field(2, ge=1)
    path_min_prior: float = 0.0
    max_prompts: int = Field(10, ge=2)
    selector_model: str | None = None
    seed: int = 0


class CandidatePrior(Protocol):
    """``prior(trajectory, t, budget, trace) -> (t-1,)`` relevance of events ``1..t-1``; NaN = unavailable."""

    name: str

    def __call__(self, trajectory: Trajectory, t: int, budget: int, trace: Trace) -> np.ndarray: ...


# ------------------------------------------------------------------------------------------------ priors
def world_ocr_text(archive: ScreenshotArchive) -> Callable[[str], str | None]:
    """Screen text of a synthetic-world screenshot by the world's exact OCR (None if unreadable)."""
    from causalcache_lab.world.ocr import OcrCache

    cache = OcrCache()

    def read(sha: str) -> str | None:
        try:
            return cache.get(sha, lambda: archive.get_bytes(sha)).text
        except Exception:  # any unreadable screenshot masks the prior for this event
            logger.debug("world OCR failed for screenshot %s", sha, exc_info=True)
            return None

    return read


class ScreenTextPrior:
    """The ``screen_text`` prior (module doc): idf-weighted words shared with the goal and the target action."""

    name = "screen_text"

    def __init__(self, archive: ScreenshotArchive, ocr: Callable[[str], str | None] | None = None) -> None:
        self.archive, self.ocr = archive, ocr
        self._words: dict[str, set[str] | None] = {}

    def _text_words(self, sha: str) -> set[str] | None:
        if sha not in self._words:
            from causalcache_memory.selector.encoding import tokens

            text = None
            try:
                text = self.archive.get_text(sha)
            except Exception:  # an archive without stored text (or a damaged record): try OCR
                logger.debug("no stored screen text for %s", sha, exc_info=True)
            if text is None and self.ocr is not None:
                text = self.ocr(sha)
            self._words[sha] = None if text is None else tokens(text)
        return self._words[sha]

    def __call__(self, trajectory: Trajectory, t: int, budget: int, trace: Trace) -> np.ndarray:
        from causalcache_memory.selector.encoding import tokens

        words = [self._text_words(e.screenshot) for e in trace.events[: t - 1]]
        action = trajectory.steps[t - 1].action
        target = tokens(action.text or "") if action is not None else set()
        query = tokens(trace.goal) | target
        df = Counter(w for ws in words if ws is not None for w in ws & query)
        n = len(words)
        out = np.full(len(words), np.nan)
        for k, ws in enumerate(words):
            if ws is not None:
                out[k] = sum(
                    math.log((n + 1) / (df[w] + 1)) * (2.0 if w in target else 1.0) for w in ws & query
                )
        return out


class SelectorPrior:
    """The ``selector`` prior (module doc): a trained scorer's gain of swapping the oldest recent slot."""

    name = "selector"

    def __init__(self, model: str | None = None) -> None:
        from causalcache_memory.selector.allocator import bundled_model_path
        from causalcache_memory.selector.features import FeatureExtractor, context_features
        from causalcache_memory.selector.onnx_scorer import OnnxScorer

        self.scorer = OnnxScorer(model or bundled_model_path())
        self.extractor = FeatureExtractor(None)
        self._context = context_features

    def __call__(self, trajectory: Trajectory, t: int, budget: int, trace: Trace) -> np.ndarray:
        witness = trajectory.steps[t - 1].action
        events = self.extractor(trace, budget, witness).astype(np.float32)
        recent = recent_b(t, budget)
        oldest = min(recent)
        cond = tuple(j for j in recent if j != oldest)
        context = self._context(t, budget, witness).astype(np.float32)
        try:
            row = self.scorer.score_sets(events, [cond], context)[0]
        except Exception:  # a non-finite score masks the prior: the state is labelled in full
            logger.debug("selector prior failed at t=%d", t, exc_info=True)
            return np.full(t - 1, np.nan)
        return np.asarray(row - row[oldest - 1], dtype=np.float64)


def make_prior(budget: PromptCap, archive: ScreenshotArchive) -> CandidatePrior:
    """The prior ``budget.prior`` names, bound to ``archive``."""
    if budget.prior == "selector":
        return SelectorPrior(budget.selector_model)
    return ScreenTextPrior(archive, world_ocr_text(archive) if budget.text == "world_ocr" else None)


# --------------------------------------------------------------------------------------------- labeller
def _explore_rng(key: str, seed: int) -> random.Random:
    digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


def _ranked_candidates(distant: Sequence[int], prior: np.ndarray, cfg: PromptCap, key: str) -> list[int]:
    """Top ``candidates`` distant events by prior (ties: newer first), then ``explore`` uniform draws."""
    ranked = sorted(distant, key=lambda j: (-prior[j - 1], -j))
    top, rest = ranked[: cfg.candidates], ranked[cfg.candidates :]
    extra = _explore_rng(key, cfg.seed).sample(rest, min(cfg.explore, len(rest)))
    return top + sorted(extra, key=lambda j: (-prior[j - 1], -j))


class SetScore(Protocol):
    """A state's deduplicating set scorer: ``score(sets) -> Q`` per set, its budget, cache and prompt count."""

    budget: int
    cache: dict[frozenset[int], float]
    prompts_scored: int

    def __call__(self, sets: Sequence[Iterable[int]]) -> list[float]: ...


#: ``(base, q_base, out, cands, q, source)``: one group of a labels record
RawGroup = tuple[list[int], float, int, list[int], list[float], str]


class _Capped:
    """Scores sets through a :class:`SetScore`, never past ``cap`` distinct prompts (truncates)."""

    def __init__(self, score: SetScore, cap: int) -> None:
        self.score, self.cap = score, cap

    def room(self) -> int:
        return self.cap - self.score.prompts_scored

    def __call__(self, sets: Sequence[frozenset[int]]) -> tuple[list[frozenset[int]], list[float]]:
        kept: list[frozenset[int]] = []
        new = 0
        for s in sets:
            fresh = s not in self.score.cache and s not in kept
            if fresh and new >= self.room():
                break
            kept.append(s)
            new += fresh
        return kept, (self.score(kept) if kept else [])


def capped_labels(
    score: SetScore,
    cfg: PromptCap | None,
    prior: CandidatePrior | None,
    archive: ScreenshotArchive,
    trajectory: Trajectory,
    t: int,
    trace: Trace,
    group: Callable[..., dict[str, Any]],
) -> tuple[tuple[float, list[dict[str, Any]], list[dict[str, Any]]] | None, dict[str, Any]]:
    """``((anchor, groups, path) or None, extra record fields)`` of one state under ``cfg``.

    None with no extra field when ``cfg`` is None (full labelling); None with ``prompt_cap.fallback``
    set when the prior is unavailable (the caller labels in full). ``prior`` is built from ``cfg`` when
    not given; ``group(*raw)`` turns a :data:`RawGroup` into the labels file's group record.
    """
    if cfg is None:
        return None, {}
    prior = prior if prior is not None else make_prior(cfg, archive)
    raw = label_capped(score, prior, trajectory, t, score.budget, trace, cfg)
    if raw is None:
        return None, {"prompt_cap": {"prior": prior.name, "fallback": "prior unavailable", "cap": None}}
    info = {"prompt_cap": {"prior": prior.name, "fallback": None, "cap": cfg.max_prompts}}
    return (raw[0], [group(*g) for g in raw[1]], raw[2]), info


def label_capped(
    score: SetScore,
    prior: CandidatePrior,
    trajectory: Trajectory,
    t: int,
    budget: int,
    trace: Trace,
    cfg: PromptCap,
) -> tuple[float, list[RawGroup], list[dict[str, Any]]] | None:
    """``(anchor, groups, path)`` of one ``(state, B)`` under ``cfg`` (module doc), or None when the prior is
    unavailable for a distant event (the caller then labels the state in full).

    ``score`` is the state's set scorer (:class:`~causalcache_lab.selector.labels._SetScorer`: a
    deduplicating cache of ``Q(S)`` with a ``prompts_scored`` count); groups are ``(base, q_base, out,
    cands, q, source)`` tuples in the labels file's group layout.
    """
    recent = recent_b(t, budget)
    rset = frozenset(recent)
    distant = [j for j in range(1, t) if j not in rset]
    p = np.asarray(prior(trajectory, t, budget, trace), dtype=np.float64)
    if p.shape != (t - 1,) or not np.all(np.isfinite(p[[j - 1 for j in distant]])):
        logger.debug(
            "prior %s unavailable at t=%d of %s: full labelling", prior.name, t, trajectory.trajectory_id
        )
        return None
    capped = _Capped(score, cfg.max_prompts)
    anchor = score([recent])[0]
    cands = _ranked_candidates(distant, p, cfg, f"{trajectory.trajectory_id}:{t}:{budget}")
    groups: list[RawGroup] = []
    best_single: dict[int, float] = {}
    moves: list[tuple[int, int, float]] = []
    for r in sorted(recent)[: cfg.slots or len(recent)]:
        sets, q = capped([(rset - {r}) | {j} for j in cands])
        if not sets:
            break
        js = cands[: len(sets)]
        groups.append((list(recent), anchor, r, js, q, "singleton"))
        moves.extend((r, j, v) for j, v in zip(js, q, strict=True))
        for j, v in zip(js, q, strict=True):
            best_single[j] = max(v, best_single.get(j, -math.inf))
    path = _capped_path(capped, groups, moves, best_single, p, recent, anchor, cfg)
    return anchor, groups, path


def _capped_path(
    capped: _Capped,
    groups: list[RawGroup],
    moves: list[tuple[int, int, float]],
    best_single: dict[int, float],
    prior: np.ndarray,
    recent: tuple[int, ...],
    anchor: float,
    cfg: PromptCap,
) -> list[dict[str, Any]]:
    """Greedy teacher path with single-slot replacement, stopped early (module doc); appends its groups."""
    rset = frozenset(recent)
    path = [{"set": list(recent), "q": anchor}]
    current, q_current = rset, anchor
    for step in range(min(cfg.path_length, len(recent))):
        if step > 0:
            left = sorted(current & rset)
            cands = [j for j in sorted(best_single, key=lambda j: (-best_single[j], j)) if j not in current]
            cands = cands[: cfg.path_candidates]
            if not left or not cands or prior[cands[0] - 1] <= cfg.path_min_prior or capped.room() <= 0:
                break
            r = left[0]
            sets, q = capped([(current - {r}) | {j} for j in cands])
            cands = cands[: len(sets)]
            groups.append((sorted(current), q_current, r, cands, q, "path"))
            moves = [(r, j, v) for j, v in zip(cands, q, strict=True)]
        step_to = path_step(moves, q_current)
        if step_to is None:
            break
        r, j, q_current = step_to
        current = (current - {r}) | {j}
        path.append({"set": sorted(current), "q": q_current})
    return path


def path_step(moves: list[tuple[int, int, float]], q_current: float) -> tuple[int, int, float] | None:
    """The teacher path's next move ``(out r, in j, Q)``: the best-scoring swap (ties: the smaller ``j``),
    None when there is none or it does not improve on ``q_current`` (the path stops). The one rule of full
    and capped labelling."""
    if not moves:
        return None
    best = max(moves, key=lambda m: (m[2], -m[1]))
    return best if best[2] > q_current else None
