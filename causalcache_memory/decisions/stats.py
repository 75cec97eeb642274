"""A memory's decision counts and its warnings when the allocator is not doing its job.

Every decision of a :class:`~causalcache_memory.controller.MemoryController` is counted here
(:class:`DecisionMonitor`, one per memory) with :class:`DecisionStats`
(:mod:`causalcache_memory.decisions.counts`, the rules that classify one decision, re-exported here), and
the same counting reads decision records back from a thread's decision log
(:meth:`DecisionStats.from_records`), so ``CausalCacheMemory.stats()``, ``causalcache report`` and the
evaluation harness agree.

Idle rule: a decision *could swap* when some past event lies outside Recent-B and B > 0 (``0 < B < t - 1``). Over the
last ``window`` such decisions of a memory (all its threads together), when the share that fell back to
Recent-B (reason ``"ood"``, a time-out, an allocator error, non-finite scores, ...) exceeds
``max_fallback_share``, the memory is not selecting, only showing Recent-B: it warns once
(a :class:`~causalcache_memory.errors.CausalCacheWarning` and a WARNING record on the
``causalcache_memory.decisions.stats`` logger) with the rate, the main reason, its cause (for the guard:
the far feature group of the declined records, ``ood_group``) and the options in order
(:mod:`causalcache_memory.idle_advice`), and :data:`IDLE_DOCS`. Pilot rule: a run shorter than the window
is summed up at :meth:`DecisionMonitor.close` (the controller's ``close()``), which warns with the same
advice when more than ``max_fallback_share`` of at least :data:`PILOT_MIN_DECISIONS` could-swap decisions
fell back and no idle warning fired.

Never-swaps rule: a selector that runs on every decision but never clears its swap threshold is as idle
as one that falls back. When ``no_swap_window`` decisions that could swap of a memory have passed, none
of them fell back to a majority (the fallback rule did not fire) and **no** decision swapped (``k = 0``
throughout) with an allocator other than ``recent``, the memory warns once, with the counts and
:data:`IDLE_DOCS`. (At a true swap rate of 2.8%, the bundled selector's on held-out worlds, 200 such
decisions without a swap happen by chance with probability ``0.972^200 = 0.3%``.)

Missing-screen-text rule: a selector trained reading each screen's text (the text group is among the
groups its model reads, ``OnnxScorer.read_groups``) runs degraded when the deployment never gives it
text: it then decides on positions, actions and summaries alone, which RESULTS.md section 8's ablation
found transfers far worse. The selector reports, on every decision it featurized, the groups it reads that
no event had (``info["masked"]``, e.g. ``"app+text"``); a model without text features never reports
``text``. Over the last ``window`` decisions that could swap, when screen text was missing on more than
``missing_text_share`` of them, the memory warns once with the counts, why it matters and the fix
(:data:`TEXT_DOCS`). This warning has its own once-per-memory slot (:attr:`DecisionMonitor.warned_text`):
a memory can get it and one idle warning (fallbacks *or* never-swaps, which share a slot since both mean
"showing Recent-B only", :attr:`DecisionMonitor.warned`).

Never-disagree rule: under a live comparison with shadow decisions (``allocation.compare.shadow``), when
``no_swap_window`` decisions that could swap carried a shadow set and **none** differed from the executed
set, the two selectors have behaved as one: no episode is triggered, so ``causalcache compare`` can only
say there is nothing to compare. The memory warns once (:attr:`DecisionMonitor.warned_shadow`, a slot of
its own) with the count and :data:`COMPARE_DOCS`, instead of letting a team wait for a verdict that
cannot come.

Every decision is also logged at DEBUG on that logger (one line: t, allocator, k, pass 2, fallback).
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, OrderedDict, deque
from typing import TYPE_CHECKING, Any

# the counting rules live in decisions/counts.py; re-exported here, where callers have always found them
from causalcache_memory.decisions.counts import (
    NO_SHADOW,
    DecisionStats,
    fallback_kind,
    shadow_differs,
    swap_possible,
    text_missing,
)
from causalcache_memory.errors import ConfigError, warn
from causalcache_memory.idle_advice import IDLE_DOCS, fallback_advice

if TYPE_CHECKING:
    from causalcache_memory.controller import StepDecision

__all__ = [
    "COMPARE_DOCS",
    "DEFAULT_MAX_FALLBACK_SHARE",
    "DEFAULT_MISSING_TEXT_SHARE",
    "DEFAULT_NO_SWAP_WINDOW",
    "DEFAULT_WINDOW",
    "IDLE_DOCS",
    "NO_SHADOW",
    "PILOT_MIN_DECISIONS",
    "TEXT_DOCS",
    "DecisionMonitor",
    "DecisionStats",
    "fallback_kind",
    "shadow_differs",
    "swap_possible",
    "text_missing",
]

_log = logging.getLogger("causalcache_memory.decisions.stats")

#: defaults of ``allocation.idle_warning`` (config) and of a controller built without a monitor
DEFAULT_WINDOW = 20
DEFAULT_MAX_FALLBACK_SHARE = 0.5
DEFAULT_NO_SWAP_WINDOW = 200
DEFAULT_MISSING_TEXT_SHARE = 0.5

#: fewest could-swap decisions for the pilot rule at close() (a shorter run says nothing)
PILOT_MIN_DECISIONS = 5

#: where the never-disagree warning sends the user: the live comparison and its triggered episodes
COMPARE_DOCS = "docs/LEARN.md#compare-before-switching"

#: where the missing-screen-text warning sends the user: how to give the memory each screen's text
TEXT_DOCS = "docs/LANGGRAPH.md#screen-text-what-was-on-the-screen-for-the-selector-never-for-the-prompt"


class DecisionMonitor:
    """Per-memory decision counts (per thread, this process) and the once-per-memory idle warning.

    Args:
        window: how many of the latest decisions that could swap the idle rule looks at (>= 1).
        max_fallback_share: warn when more than this share of them fell back, in ``[0, 1)``.
        enabled: False = count, but never warn.
        no_swap_window: warn (once) when this many decisions that could swap passed without a single swap
            (None: never; the rule does not apply to the ``recent`` allocator, which never swaps).
        missing_text_share: warn (once) when screen text was missing on more than this share of the last
            ``window`` decisions that could swap, in ``[0, 1)`` (None: never; see the module doc).
        max_threads: per-thread counts kept for at most this many threads (the oldest dropped).
        ocr_engine: the memory's ``archive.ocr.engine``: with an engine configured, the missing-text
            warning says the OCR text was late or not stored, instead of advising to configure OCR.

    Thread-safe: the threads of one memory decide concurrently through one controller.
    """

    def __init__(
        self,
        *,
        window: int = DEFAULT_WINDOW,
        max_fallback_share: float = DEFAULT_MAX_FALLBACK_SHARE,
        enabled: bool = True,
        no_swap_window: int | None = DEFAULT_NO_SWAP_WINDOW,
        missing_text_share: float | None = DEFAULT_MISSING_TEXT_SHARE,
        max_threads: int = 4096,
        ocr_engine: str = "none",
    ) -> None:
        if isinstance(window, bool) or not isinstance(window, int) or window < 1:
            raise ConfigError(f"window={window!r} must be an integer >= 1, e.g. window=20")
        if not 0.0 <= float(max_fallback_share) < 1.0:
            raise ConfigError(
                f"max_fallback_share={max_fallback_share!r} must be in [0, 1), e.g. 0.5; "
                "to never warn, pass enabled=False"
            )
        if no_swap_window is not None and (
            isinstance(no_swap_window, bool) or not isinstance(no_swap_window, int) or no_swap_window < 1
        ):
            raise ConfigError(f"no_swap_window={no_swap_window!r} must be an integer >= 1 or None, e.g. 200")
        if missing_text_share is not None and (
            isinstance(missing_text_share, bool)
            or not isinstance(missing_text_share, int | float)
            or not 0.0 <= float(missing_text_share) < 1.0
        ):
            raise ConfigError(
                f"missing_text_share={missing_text_share!r} must be a share in [0, 1) or None, e.g. 0.5 "
                "(warn when screen text is missing on more than half); None: never"
            )
        self.window = window
        self.no_swap_window = no_swap_window
        self._could_swap = 0  # decisions that could swap, and how many of them swapped (all threads)
        self._swapped = 0
        self._shadowed = 0  # of those, decisions with a shadow set, and how many of them differed
        self._shadow_differed = 0
        self.max_fallback_share = float(max_fallback_share)
        self.ocr_engine = str(ocr_engine)
        self.enabled = enabled
        self._max_threads = max_threads
        self.missing_text_share = None if missing_text_share is None else float(missing_text_share)
        self._recent: deque[str | None] = deque(maxlen=window)
        self._far: deque[str | None] = deque(maxlen=window)  # the guard's far group, per could-swap decision
        self._kinds_total: Counter[str] = Counter()  # fallback kinds over every could-swap decision
        self._far_total: Counter[str] = Counter()
        self.closed_summary: str | None = None  #: the summary :meth:`close` gave (warned or logged)
        self._allocator = "selector"
        self._text_missing_seen = False  # screen text missing on any could-swap decision so far
        self._refit_declined = False  # a decline by the guard refitted on this memory's states (ood_refit)
        self._no_text: deque[bool] = deque(maxlen=window)  # screen text missing, per could-swap decision
        self._threads: OrderedDict[str, DecisionStats] = OrderedDict()
        self._lock = threading.Lock()
        self.warned: str | None = None  #: the idle warning's text (fallbacks or never-swaps) once it fired
        self.warned_text: str | None = None  #: the missing-screen-text warning's text once it fired
        self.warned_shadow: str | None = None  #: the never-disagree warning's text once it fired

    def observe(self, episode_id: str, decision: StepDecision, *, allocator: str | None = None) -> None:
        """Count ``decision`` of thread ``episode_id``; warn (once) when the memory is idle.

        ``allocator``: the configured allocator's name, which the warnings name (default: the
        allocation's; a time-out or an error falls back to a ``recent`` allocation, whose name is not the
        allocator that failed)."""
        allocation = decision.allocation
        name = allocator or allocation.allocator
        t, budget, k = decision.t, allocation.budget, allocation.k
        if _log.isEnabledFor(logging.DEBUG):
            _log.debug(
                "%s t=%d: allocator=%s k=%d second_pass=%s fallback=%s",
                episode_id,
                t,
                allocation.allocator,
                k,
                decision.second_pass,
                decision.fallback,
            )
        message = text_message = shadow_message = None
        masked = allocation.info.get("masked")
        shadow = allocation.info.get("shadow_selected", NO_SHADOW)
        with self._lock:
            stats = self._threads.pop(episode_id, None) or DecisionStats()
            self._threads[episode_id] = stats  # most recently used last
            while len(self._threads) > self._max_threads:
                self._threads.popitem(last=False)
            shadowed, differed = stats.shadow, stats.shadow_disagreed  # this decision's share, read below
            kind = stats.add(
                t=t,
                budget=budget,
                k=k,
                second_pass=decision.second_pass,
                fallback=decision.fallback,
                masked=masked,
                shadow=shadow,
                selected=allocation.selected,
                prompt_cost=decision.extra.get("prompt_cost"),
            )
            if swap_possible(t, budget):
                self._allocator = name
                self._recent.append(kind)
                far = allocation.info.get("ood_group") if kind == "ood" else None
                self._far.append(far if isinstance(far, str) else None)
                if kind is not None:
                    self._kinds_total[kind] += 1
                if isinstance(far, str):
                    self._far_total[far] += 1
                if kind == "ood" and allocation.info.get("ood_refit") == "refit":
                    self._refit_declined = True
                self._no_text.append(text_missing(masked))
                self._text_missing_seen = self._text_missing_seen or text_missing(masked)
                self._could_swap += 1
                self._swapped += int(k > 0)
                message = self._idle_message(name) or self._no_swap_message(name, allocation.allocator)
                if message is not None:
                    self.warned = message
                text_message = self._missing_text_message(name)
                if text_message is not None:
                    self.warned_text = text_message
                if stats.shadow > shadowed:  # a shadow set was counted (compared once, in stats.add)
                    self._shadowed += 1
                    self._shadow_differed += stats.shadow_disagreed - differed
                    shadow_message = self._never_disagree_message()
                    if shadow_message is not None:
                        self.warned_shadow = shadow_message
        for text in (message, text_message, shadow_message):
            if text is not None:
                warn(text, logger=_log, stacklevel=3)  # points at the caller of decide()

    def _idle_message(self, allocator: str) -> str | None:
        """The warning's text when the rule is crossed for the first time (lock held)."""
        if not self.enabled or self.warned is not None or len(self._recent) < self.window:
            return None
        kinds = Counter(k for k in self._recent if k is not None)
        fell_back = sum(kinds.values())
        share = fell_back / self.window
        if share <= self.max_fallback_share:
            return None
        reason, times = kinds.most_common(1)[0]
        far = Counter(g for g in self._far if g is not None)
        return (
            f"the allocator {allocator!r} fell back to Recent-B on {fell_back} of the last {self.window} "
            f"decisions where a swap was possible ({share:.0%}, above the {self.max_fallback_share:.0%} "
            f"limit); main reason: {reason!r} ({times} of them): "
            f"{fallback_advice(reason, far, times, text_missing=any(self._no_text), allocator=allocator, refitted=self._refit_declined)} "
            f"The memory is showing Recent-B only. See {IDLE_DOCS}. (Warned once per memory; "
            "allocation.idle_warning sets the rule.)"
        )

    def close(self) -> str | None:
        """The pilot rule and the summary at the end of a run (idempotent; returns the summary).

        A short pilot never fills the idle rule's window: when fewer than ``window`` decisions that could
        swap were seen (at least :data:`PILOT_MIN_DECISIONS`), more than ``max_fallback_share`` of them fell
        back and no idle warning fired, this warns once with the summary and the same advice as the idle
        warning. Otherwise the summary is logged at INFO.
        """
        with self._lock:
            if self.closed_summary is not None or not self._could_swap:
                return self.closed_summary
            fell_back = sum(self._kinds_total.values())
            share = fell_back / self._could_swap
            summary = (
                f"this memory's run: {self._could_swap} decisions where a swap was possible, {self._swapped} "
                f"swapped, {fell_back} fell back to Recent-B ({share:.0%})"
                + (
                    f" ({', '.join(f'{k}: {n}' for k, n in self._kinds_total.most_common())})"
                    if fell_back
                    else ""
                )
            )
            pilot = (
                self.enabled
                and self.warned is None
                and PILOT_MIN_DECISIONS <= self._could_swap < self.window
                and share > self.max_fallback_share
            )
            if pilot:
                reason, times = self._kinds_total.most_common(1)[0]
                summary = (
                    f"{summary}: more than the {self.max_fallback_share:.0%} limit, in a run shorter than the "
                    f"idle rule's window of {self.window} (a pilot); the allocator {self._allocator!r} showed "
                    f"Recent-B only. Main reason: {reason!r} ({times} of them): "
                    f"{fallback_advice(reason, self._far_total, times, text_missing=self._text_missing_seen, allocator=self._allocator, refitted=self._refit_declined)} "
                    f"See {IDLE_DOCS}."
                )
                self.warned = summary
            self.closed_summary = summary
        if pilot:
            warn(summary, logger=_log, stacklevel=3)
        else:
            _log.info("%s", summary)
        return summary

    def _no_swap_message(self, allocator: str, decided_by: str) -> str | None:
        """The never-swaps warning's text when its rule is crossed for the first time (lock held).

        ``decided_by``: the allocation's own name; Recent-B never swaps by design, whether it is the
        configured allocator or the arm that decided (e.g. an exploring allocator over Recent arms)."""
        if (
            not self.enabled
            or self.warned is not None
            or self.no_swap_window is None
            or "recent" in (allocator, decided_by)
            or self._swapped
            or self._could_swap < self.no_swap_window
        ):
            return None
        return (
            f"the allocator {allocator!r} swapped on none of the {self._could_swap} decisions where a swap "
            "was possible: it ran (no majority of fallbacks) but its predicted gains never reached its swap "
            "threshold, so the memory is showing Recent-B only. If your tasks need older screens, lower the "
            "threshold (allocation.selector.second_pass_share, or min_gain) or train the selector on your "
            f"own agent. What to do: {IDLE_DOCS}. (Warned once per memory; "
            "allocation.idle_warning.no_swap_window sets the rule.)"
        )

    def _never_disagree_message(self) -> str | None:
        """The never-disagree warning's text when its rule is crossed for the first time (lock held)."""
        if (
            not self.enabled
            or self.warned_shadow is not None
            or self.no_swap_window is None
            or self._shadow_differed
            or self._shadowed < self.no_swap_window
        ):
            return None
        return (
            f"the selector and the one it is compared with (allocation.compare) chose the same set on all "
            f"{self._shadowed} decisions with a shadow decision where a swap was possible: so far no episode "
            "differs between the two arms, and `causalcache compare` has nothing to judge. If the deployed "
            "selector is a fine-tune of the compared one, it behaves like it here: keep either, or record "
            "episodes that explore (allocation.explore) and rerun `causalcache learn`. See "
            f"{COMPARE_DOCS}. (Warned once per memory; allocation.idle_warning.no_swap_window sets the rule.)"
        )

    def _missing_text_message(self, allocator: str) -> str | None:
        """The missing-screen-text warning's text when its rule is crossed for the first time (lock held)."""
        if (
            not self.enabled
            or self.warned_text is not None
            or self.missing_text_share is None
            or len(self._no_text) < self.window
        ):
            return None
        missing = sum(self._no_text)
        share = missing / self.window
        if share <= self.missing_text_share:
            return None
        return (
            f"screen text was missing on {missing} of the last {self.window} decisions where a swap was "
            f"possible ({share:.0%}, above the {self.missing_text_share:.0%} limit), but the allocator "
            f"{allocator!r} was trained reading each screen's text: without it, it judges old screens by "
            "position, action and summary only, which transfers far worse to screens unlike its training "
            f"data (RESULTS.md section 8, the ablation without the text features). Fix: {self._text_fix()} "
            f"See {TEXT_DOCS}. (Warned once per memory; "
            "allocation.idle_warning.missing_text_share sets the rule, null disables it.)"
        )

    def _text_fix(self) -> str:
        """How to give the selector text: configure OCR, or (OCR configured) why its text was missing."""
        given = (
            "return `screen_text` beside the screenshot from your screenshot node (under create_agent, the "
            "tool's artifact={'screen_text': ...})"
        )
        if self.ocr_engine in ("", "none"):
            return (
                f"{given}, or let the memory OCR the screenshots (archive.ocr.engine: rapidocr or tesseract)."
            )
        return (
            f"OCR is configured (archive.ocr.engine: {self.ocr_engine}) but its text was not ready when these "
            "decisions were made, or was not stored: see the OCR warnings in the log and "
            "memory.screen_text_stats() (late screens: raise archive.ocr.threads or lower archive.ocr.det_side; "
            f"failed reads: the engine's install), or {given}."
        )

    def stats(self) -> dict[str, DecisionStats]:
        """Per-thread counts of the decisions this monitor saw (this process), by episode id."""
        with self._lock:
            return {episode: stats.copy() for episode, stats in self._threads.items()}

    @classmethod
    def from_config(cls, config: Any, *, ocr_engine: str = "none") -> DecisionMonitor:
        """From an ``allocation.idle_warning`` section (:class:`~causalcache_memory.config.models.IdleWarningConfig`)
        and the memory's ``archive.ocr.engine``."""
        return cls(
            ocr_engine=ocr_engine,
            window=config.window,
            max_fallback_share=config.max_fallback_share,
            enabled=config.enabled,
            no_swap_window=config.no_swap_window,
            missing_text_share=config.missing_text_share,
        )
