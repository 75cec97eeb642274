"""The framework-agnostic memory controller: record steps, allocate, render, and the two-pass re-decision.

Two-pass re-decision (paper, Method, "Reference actions"; Figure 2b):

1. pass 1 renders the Recent-B allocation and the policy proposes ``a_1``;
2. the allocator scores the complete trace with ``a_1`` as witness and returns ``S*``;
3. if ``S* = Recent-B``, ``a_1`` is emitted with no extra model call; otherwise the prompt is re-rendered
   under ``S*`` and the *same* policy (same weights, greedy) produces ``a_2``, which replaces ``a_1`` —
   never a choice between samples.

Allocators that take no witness (Recent-B, Random, RGB, summary-only) run a single pass on their own set.
If the allocator fails (exception, missing model, time limit) the step falls back to Recent-B with a
:class:`~causalcache_memory.errors.CausalCacheWarning` (under a live comparison its record says
``shadow_selected: null``): never worse than the baseline, never a crashed episode. A missing or corrupt
screenshot raises :class:`PromptImageError` (never a silently different prompt).

The LangGraph integration (``causalcache_memory.integrations.langgraph``) and the closed-loop harness drive it.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
import weakref
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from causalcache_memory._worker import BoundedWorker, WorkerBusy, WorkerTimeout
from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    Allocator,
    check_budget,
    make_allocation,
)
from causalcache_memory.allocation.simple import RecentAllocator
from causalcache_memory.archive.base import StoredImage
from causalcache_memory.decisions.stats import DecisionMonitor
from causalcache_memory.decisions.step import StepDecision
from causalcache_memory.errors import CausalCacheWarning, PolicyError, PromptImageError
from causalcache_memory.render.prompt import RenderOptions, render_prompt
from causalcache_memory.summarize import unparsed_summary
from causalcache_memory.warmup import warm_allocator, warm_on_trace

if TYPE_CHECKING:
    from PIL import Image

    from causalcache_memory.actions.model import Action
    from causalcache_memory.archive.base import ScreenshotArchive
    from causalcache_memory.policy import Generation, Policy
    from causalcache_memory.prompt_cost.meter import PromptCostMeter
    from causalcache_memory.render.messages import RenderedPrompt
    from causalcache_memory.trace import Event, Trace

__all__ = ["MemoryController", "StepDecision", "unparsed_summary"]  # the last two: re-exported

_log = logging.getLogger("causalcache_memory.controller")


@dataclass(frozen=True, slots=True)
class _Step:
    """Per-decision state: the policy that acts and the prompt images already checked present."""

    policy: Policy
    present: set[str] = field(default_factory=set)
    costs: list[dict[str, float | int] | None] = field(
        default_factory=list
    )  # one per model call (prompt_cost)


class MemoryController:
    """Runs the memory side of an agent step around a :class:`~causalcache_memory.policy.Policy`.

    Args:
        policy: the (frozen) GUI policy; None when every :meth:`decide` passes its own (a memory's
            controller: the step's model is an adapter of the user's model node or handler).
        archive: where screenshots live.
        allocator: chooses ``S``; an allocator with ``uses_witness`` triggers the two-pass protocol.
        budget: ``B``.
        two_pass: disable to run witness-taking allocators in a single pass with no witness (ablation).
        render_options: fixed prompt text.
        selector_timeout_s: time limit of each allocator call (``allocate`` and ``prepare``), which runs
            on a worker thread this controller owns (:mod:`causalcache_memory._worker`); ``None`` = on the
            caller's thread, unbounded. ``close()`` (or ``with``) stops the worker.
        monitor: counts every decision and warns once when the allocator mostly falls back
            (:mod:`causalcache_memory.decisions.stats`); default: one of its own with the default rule.
        prompt_cost: a :class:`~causalcache_memory.prompt_cost.meter.PromptCostMeter`: each decision's
            record then carries ``prompt_cost``, the predicted cache reads and writes of every model call
            (None, the default: nothing is counted).
    """

    def __init__(
        self,
        *,
        policy: Policy | None = None,
        archive: ScreenshotArchive,
        allocator: Allocator,
        budget: int,
        two_pass: bool = True,
        render_options: RenderOptions | None = None,
        selector_timeout_s: float | None = 0.25,
        monitor: DecisionMonitor | None = None,
        prompt_cost: PromptCostMeter | None = None,
    ) -> None:
        self.policy = policy
        self.archive = archive
        self.allocator = allocator
        self.budget = check_budget(budget)
        self.two_pass = two_pass
        self.render_options = render_options or RenderOptions()
        self.selector_timeout_s = selector_timeout_s
        self.monitor = monitor if monitor is not None else DecisionMonitor()
        self.prompt_cost = prompt_cost
        self._cost_warned = False
        self._recent = RecentAllocator()
        self._worker: BoundedWorker | None = None
        self._worker_lock = threading.Lock()
        self._warmed: set[str] = set()  # threads whose caches warm() filled (episode ids)
        use_layout = getattr(allocator, "use_layout", None)  # a priced allocator prices this layout
        if use_layout is not None:
            use_layout(self.render_options.layout)
        thresholds = getattr(allocator, "thresholds", None)  # the learned selector's (selector/threshold.py)
        if thresholds is not None and callable(getattr(thresholds, "describe", None)):
            deployment = getattr(allocator, "deployment", None) is not None
            _log.info("%s", thresholds.describe(self.budget, deployment=deployment))  # this B's value first

    # ------------------------------------------------------------------ trace bookkeeping
    def put(self, screenshot: bytes | Image.Image) -> StoredImage:
        """Archive ``screenshot`` (validated once, by the archive): its hash with the header's size.

        Pass this as the ``put`` function of code that archives screenshots for this step, and hand the
        :class:`StoredImage` to :meth:`observe`/:meth:`record`, which then neither re-check nor re-open it.
        """
        return self.archive.put(screenshot)

    def observe(self, trace: Trace, screenshot: bytes | Image.Image | StoredImage | str) -> str:
        """Archive ``screenshot`` (bytes/PIL, a :class:`StoredImage`, or an existing hash); make it current.

        The screen's ``(width, height)`` is recorded with it (:attr:`Trace.current_screen_size`).
        """
        sha, size = self._store(trace, screenshot)
        trace.observe(sha, size=size)
        return sha

    def record(
        self,
        trace: Trace,
        decision_or_action: StepDecision | Action | None,
        screenshot: bytes | Image.Image | StoredImage | str,
        *,
        response: str | None = None,
        app: str | None = None,
        screen_size: tuple[int, int] | None = None,
        metadata: dict[str, Any] | None = None,
        parse_error: str | None = None,
    ) -> Event:
        """Append the executed step to the trace with its archived post-action screenshot.

        A step whose reply held no parsable action (``decision.action`` or the action is None) is still
        recorded, so no executed step is missing from the trace: its event keeps the verbatim reply,
        its ``action`` is a ``wait`` placeholder, ``metadata`` holds ``{"unparsed": True, "parse_error"}``
        and the summary says the reply was not parsed. ``screen_size`` defaults to the recorded size of
        the screen the action was taken on; the post-action screenshot's size is recorded too.
        """
        if isinstance(decision_or_action, StepDecision):
            action = decision_or_action.action
            response = decision_or_action.response if response is None else response
            parse_error = parse_error or decision_or_action.generation.parse_error
        else:
            action = decision_or_action
        sha, size = self._store(trace, screenshot)
        summary = None
        meta = dict(metadata or {})
        if action is None:
            from causalcache_memory.actions.model import Action as _Action

            action = _Action("wait")
            meta.update(unparsed=True, parse_error=parse_error or "no action found in the reply")
            summary = unparsed_summary(len(trace) + 1, response or "", app)
        return trace.record(
            action,
            response or "",
            sha,
            app=app,
            screen_size=screen_size,
            summary=summary,
            metadata=meta,
            screenshot_size=size,
        )

    def _store(
        self, trace: Trace, screenshot: bytes | Image.Image | StoredImage | str
    ) -> tuple[str, tuple[int, int] | None]:
        if isinstance(screenshot, str):  # archived elsewhere: one verified read gives existence + size
            sha = screenshot
            try:
                with self.archive.open_image(sha) as image:
                    size: tuple[int, int] | None = (int(image.width), int(image.height))
            except Exception as exc:
                raise PromptImageError(
                    f"screenshot {sha} cannot be read from the archive at {self.archive.url}: {exc}"
                ) from exc
        else:
            stored = screenshot if isinstance(screenshot, StoredImage) else self.put(screenshot)
            sha, size = stored.sha256, stored.size
        self.archive.retain(trace.episode_id, [sha])
        self._prepare(sha)
        return sha, size

    def _prepare(self, sha: str) -> None:
        """Call the allocator's optional ``prepare(archive, sha256)`` hook (e.g. thumbnail prefetch)."""
        prepare = getattr(self.allocator, "prepare", None)
        if prepare is None:
            return
        try:
            if self.selector_timeout_s is None:
                prepare(self.archive, sha)
            else:  # on the worker, bounded: observe/record never wait on a hung allocator's locks
                self._owned_worker().call(prepare, self.archive, sha, timeout_s=self.selector_timeout_s)
        except Exception as exc:  # a preparation is an optimization: never fail the step for it
            warnings.warn(
                f"allocator {self.allocator.name!r} prepare() failed for screenshot {sha}: "
                f"{type(exc).__name__}: {exc}; the allocator will compute what it needs when it allocates",
                CausalCacheWarning,
                stacklevel=4,
            )

    # ------------------------------------------------------------------ untimed allocations
    @staticmethod
    def warm_allocator(allocator: Allocator, budget: int) -> None:
        """Load ``allocator`` before any timed decision (:func:`~causalcache_memory.warmup.warm_allocator`).

        Static: a memory's controllers (one per archive) share one allocator, warmed when the memory is
        built, before any archive is opened. :meth:`warmup` is the same for this controller's allocator.
        """
        warm_allocator(allocator, budget)

    def warmup(self) -> None:
        """Load this controller's allocator before its first timed decision (see :meth:`warm_allocator`)."""
        warm_allocator(self.allocator, self.budget)

    def warm(self, trace: Trace) -> None:
        """Once per thread (episode id) in this process: one untimed allocation on ``trace`` before its
        first timed decision, filling the caches of a resumed thread's screenshots (result discarded;
        witness-taking allocators only; :func:`~causalcache_memory.warmup.warm_on_trace`)."""
        with self._worker_lock:
            if trace.episode_id in self._warmed:
                return
            if len(self._warmed) > 65536:
                self._warmed.clear()
            self._warmed.add(trace.episode_id)  # a thread started here warms as it goes (prepare())
        warm_on_trace(self.allocator, AllocationContext(trace, self.budget, self.archive))

    # ------------------------------------------------------------------ decisions
    def decide(self, trace: Trace, *, policy: Policy | None = None) -> StepDecision:
        """Choose the allocation and the action for decision ``t = trace.t``.

        ``policy`` overrides the controller's own for this decision (one controller serves every step
        of a memory, whose model may be a per-call adapter such as a graph node).
        """
        chosen = policy if policy is not None else self.policy
        if chosen is None:
            raise PolicyError("this controller has no policy: pass decide(trace, policy=...)")
        step = _Step(chosen)  # prompt images checked once a step
        run = self._two_pass if self.allocator.uses_witness and self.two_pass else self._single_pass
        decision = run(trace, step)
        if step.costs:
            decision.extra["prompt_cost"] = step.costs
        self.monitor.observe(trace.episode_id, decision, allocator=self.allocator.name)
        return decision

    def _generate(self, trace: Trace, allocation: Allocation, step: _Step) -> tuple[Generation, float]:
        rendered = render_prompt(trace, allocation, options=self.render_options)
        if self.prompt_cost is not None:
            step.costs.append(self._count_prompt(trace, rendered))
        prompt = rendered.bind(self.archive, present=step.present)
        start = time.perf_counter()
        generation = step.policy.generate(prompt)
        return generation, time.perf_counter() - start

    def _count_prompt(self, trace: Trace, rendered: RenderedPrompt) -> dict[str, float | int] | None:
        """The meter's prediction for this call; None (and a warning) when it cannot count: metering is a
        report, it never fails the step."""
        try:
            return self.prompt_cost.observe(trace, rendered).to_dict()  # type: ignore[union-attr]
        except Exception as exc:
            where = f"step {trace.t} of {trace.episode_id}"
            message = f"prompt cost not counted for {where}: {type(exc).__name__}: {exc}"
            if self._cost_warned:  # warned once per controller; later failures are logged
                _log.info("%s", message)
            else:
                self._cost_warned = True
                warnings.warn(f"{message} (warned once)", CausalCacheWarning, stacklevel=5)
            return None

    def _recent_allocation(self, trace: Trace) -> Allocation:
        return self._recent.allocate(AllocationContext(trace, self.budget, self.archive))

    def _allocate(self, trace: Trace, witness: Action | None) -> tuple[Allocation, float, str | None]:
        ctx = AllocationContext(trace, self.budget, self.archive, witness=witness)
        start = time.perf_counter()
        try:
            if self.selector_timeout_s is None:
                allocation = self.allocator.allocate(ctx)
            else:
                allocation = self._owned_worker().call(
                    self.allocator.allocate, ctx, timeout_s=self.selector_timeout_s, label=f"step {trace.t}"
                )
            if allocation.t != trace.t:
                raise ValueError(f"returned a set for decision t={allocation.t}, not {trace.t}")
            # exact-B: |S| = min(B, t-1), no repeated event, every event in 1..t-1 (AllocationError)
            # (an allocator with another budget contract, e.g. mean-B, gives the sizes it allows: size_bounds)
            bounds = getattr(self.allocator, "size_bounds", None)
            checked = make_allocation(
                allocation.selected,
                t=trace.t,
                budget=self.budget,
                allocator=self.allocator.name,
                sizes=bounds(trace.t, self.budget) if bounds is not None else None,
            )
            allocation = replace(allocation, selected=checked.selected)  # ascending, as documented
        except WorkerTimeout:
            reason = (
                f"allocator {self.allocator.name!r} exceeded {(self.selector_timeout_s or 0.0) * 1000:.0f} ms"
            )
            return self._fallback(trace, reason, start)
        except WorkerBusy as exc:
            reason = f"allocator {self.allocator.name!r} is {exc}"
            return self._fallback(trace, reason, start)
        except PromptImageError:
            raise
        except Exception as exc:  # never crash the episode because of the selector
            reason = f"allocator {self.allocator.name!r} failed: {type(exc).__name__}: {exc}"
            return self._fallback(trace, reason, start)
        # an allocator may decline to search and say why (e.g. the selector's "ood" guard)
        return allocation, time.perf_counter() - start, allocation.info.get("fallback")

    def _fallback(self, trace: Trace, reason: str, start: float) -> tuple[Allocation, float, str]:
        _log.info("%s; falling back to Recent-B for step %d of %s", reason, trace.t, trace.episode_id)
        message = f"{reason}; falling back to Recent-B for step {trace.t}"
        warnings.warn(message, CausalCacheWarning, stacklevel=5)
        recent = self._recent_allocation(trace)  # under a live comparison neither arm decided: shadow missing
        missing = {"shadow_selected": None} if getattr(self.allocator, "shadow", False) else {}
        return replace(recent, info={**recent.info, **missing}), time.perf_counter() - start, reason

    def _single_pass(self, trace: Trace, step: _Step) -> StepDecision:
        allocation, sel_s, fallback = self._allocate(trace, None)
        generation, gen_s = self._generate(trace, allocation, step)
        return StepDecision(
            t=trace.t,
            generation=generation,
            allocation=allocation,
            pass_latency_s=(gen_s,),
            selector_latency_s=sel_s,
            fallback=fallback,
        )

    def _two_pass(self, trace: Trace, step: _Step) -> StepDecision:
        base = getattr(self.allocator, "base_allocation", None)  # a priced allocator's held set
        recent = (
            base(AllocationContext(trace, self.budget, self.archive))
            if base is not None
            else self._recent_allocation(trace)
        )
        proposal, first_s = self._generate(trace, recent, step)
        allocation, sel_s, fallback = self._allocate(trace, proposal.action)
        if allocation.selected == recent.selected:
            return StepDecision(
                t=trace.t,
                generation=proposal,
                allocation=allocation,
                proposal=proposal,
                pass_latency_s=(first_s,),
                selector_latency_s=sel_s,
                fallback=fallback,
            )
        final, second_s = self._generate(trace, allocation, step)
        return StepDecision(
            t=trace.t,
            generation=final,
            allocation=allocation,
            proposal=proposal,
            second_pass=True,
            pass_latency_s=(first_s, second_s),
            selector_latency_s=sel_s,
        )

    def _owned_worker(self) -> BoundedWorker:
        with self._worker_lock:  # one worker, also when threads of one memory decide concurrently
            if self._worker is None:
                self._worker = BoundedWorker("causalcache-alloc")
                weakref.finalize(self, self._worker.close, None)  # dropped: stop it, never join (P16)
            return self._worker

    def close(self, *, wait: bool = True) -> None:
        """Stop the allocator worker and (``wait=True``) close the monitor (pilot rule); ``wait=False`` never joins."""
        self.monitor.close() if wait else None
        if self._worker is not None:
            self._worker.close() if wait else self._worker.close(None)
            self._worker = None

    def __enter__(self) -> MemoryController:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
