"""The learned selector as an allocator: features -> OOD guard -> ONNX set scorer -> exact-B beam.

Naming: the *learned selector* is this allocator (:class:`SelectorAllocator`, registered as
``selector``, configured under ``allocation.selector``); its *scorer* is the exported ONNX network it runs
(:class:`~causalcache_memory.selector.onnx_scorer.OnnxScorer`), an internal component.

``SelectorAllocator().allocate(ctx)`` featurizes the complete trace with ``ctx.witness`` as reference
action (the pass-1 proposal in the two-pass controller), checks that the state looks like the training
states (out-of-distribution guard), scores conditioning sets with onnxruntime and returns the beam's
exact-B set; ``Recent-B`` when every swap is declined or the state is out of distribution. The
allocation's ``info`` carries the predicted gain, the threshold used and, for a guarded state,
``fallback: "ood"`` (the controller puts it in the decision log). No torch is imported.

:meth:`SelectorAllocator.decide` is the decision rule on already featurized events (OOD guard, scorer,
beam, threshold); :meth:`~SelectorAllocator.allocate` and the lab's allocation ladder both call it.
"""

from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from causalcache_memory.allocation.base import (
    Allocation,
    AllocationContext,
    exact_b_size,
    make_allocation,
    recent_b,
)
from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.beam import beam_search
from causalcache_memory.selector.features import FeatureExtractor, context_features
from causalcache_memory.selector.onnx_scorer import OnnxScorer
from causalcache_memory.selector.ood import RobustGuard, state_summary
from causalcache_memory.selector.ood_explain import far_group, group_contributions
from causalcache_memory.selector.ood_masks import state_pattern
from causalcache_memory.selector.ood_refit import (
    DEFAULT_REFIT,
    DEFAULT_REFIT_WARMUP,
    RefitGuard,
    check_refit,
    check_refit_warmup,
)
from causalcache_memory.selector.screen_text import ScreenTextSource, TextWithLines, archive_screen_text
from causalcache_memory.selector.threshold import (
    DEFAULT_SECOND_PASS_SHARE,
    DEFAULT_SHARE_WINDOW,
    DeploymentThreshold,
    check_window,
    resolve_min_gain,
    resolve_thresholds,
)
from causalcache_memory.selector.witness_check import (
    DEFAULT_WITNESS_CHECK,
    displaced_sources,
    witness_sources,
)

if TYPE_CHECKING:
    import numpy as np

    from causalcache_memory.actions.model import Action
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["BUNDLED_MODEL", "SelectorAllocator", "bundled_model_path", "resolve_min_gain"]

#: where the bundled scorer lives inside the package
BUNDLED_MODEL = ("causalcache_memory", "assets/selector/selector.onnx")


def bundled_model_path() -> Path:
    """Path of the bundled ``selector.onnx``; :class:`SelectorError` when this build ships none."""
    ref = resources.files(BUNDLED_MODEL[0]).joinpath(BUNDLED_MODEL[1])
    if not ref.is_file():
        raise SelectorError(
            "no bundled selector model: causalcache_memory/assets/selector/selector.onnx is missing from this "
            "installation; pass SelectorAllocator(model_path=...) with a model trained by "
            "`causalcache train selector`, or install a release that bundles one"
        )
    return Path(str(ref))


class SelectorAllocator:
    """Learned budget-aware restoration selector (:class:`Allocator`).

    Args:
        model_path: ``.onnx`` file or model directory, or an already loaded :class:`OnnxScorer`; None
            loads the bundled model.
        beam_width: beam size of the exact-B search.
        threads: onnxruntime intra-op threads.
        inverted: negate every predicted marginal (specificity control of the allocation ladder).
        thumbnail_size: side of the thumbnails used for image statistics (needs ``ctx.archive``).
        min_gain: smallest predicted gain for which a swap is taken: ``"auto"`` (default) = the threshold
            chosen for ``second_pass_share`` from the dev frontier stored in the model; ``0`` = the
            paper's rule (every positive predicted gain); larger values
            decline near-neutral swaps (:mod:`~causalcache_memory.selector.threshold`).
        second_pass_share: with ``min_gain="auto"``, the largest share of decisions that may run pass 2,
            in ``[0, 1]`` (default 0.15).
        share_window: with ``min_gain="auto"``, hold the share on this allocator's own latest
            ``share_window`` decisions per ``B`` (:class:`~causalcache_memory.selector.threshold.
            DeploymentThreshold`; the dev threshold during the warm-up); None = the dev-calibrated
            threshold only.
        ood_guard: fall back to Recent-B (reason ``ood``) on states outside the training distribution
            (needs a model exported with OOD statistics; older models are not guarded).
        ood_scale: multiplies the model's OOD distance threshold (> 1 is more permissive).
        ood_refit: an integer ``N`` (default 64) = the guard's center/scale refitted on the first ``N``
            featurized decisions' unlabelled states, judging from then on; None = the model's guard on
            every decision (:mod:`~causalcache_memory.selector.ood_refit`).
        ood_refit_warmup: ``"open"`` (default) = no covariate guard until the refit (needs ``ood_refit``
            and ``witness_check``, which judges from the first decision); ``"bundled"`` = the model's guard
            judges during the warm-up.
        witness_check: refuse a set that displaces a Recent-B screen showing the value the pass-1
            proposal types, and search again with those screens held (default on;
            :mod:`~causalcache_memory.selector.witness_check`).

        The defaults are guard try 2 (docs/notebook/results/guard_rule_try2.md); the guard before it is
        ``ood_refit=None, ood_refit_warmup="bundled", witness_check=False``.
        screen_text: where the ``text_*`` features read each screenshot's text
            (``get_text(sha256) -> str | None``); None = ``ctx.archive`` when it has ``get_text``, else the
            text features are masked (0, ``text_available = 0``).
    """

    name = "selector"
    uses_witness = True

    def __init__(
        self,
        model_path: str | Path | OnnxScorer | None = None,
        *,
        beam_width: int = 4,
        threads: int = 1,
        inverted: bool = False,
        thumbnail_size: int = 32,
        min_gain: float | Literal["auto"] = "auto",
        second_pass_share: float = DEFAULT_SECOND_PASS_SHARE,
        share_window: int | None = DEFAULT_SHARE_WINDOW,
        ood_guard: bool = True,
        ood_scale: float = 1.0,
        ood_refit: int | None = DEFAULT_REFIT,
        ood_refit_warmup: Literal["bundled", "open"] = DEFAULT_REFIT_WARMUP,
        witness_check: bool = DEFAULT_WITNESS_CHECK,
        screen_text: ScreenTextSource | None = None,
    ) -> None:
        if beam_width < 1:
            raise SelectorError(f"beam_width={beam_width} must be >= 1")
        check_refit_warmup(ood_refit_warmup, ood_refit, witness_check)
        if not ood_scale > 0.0:
            raise SelectorError(f"ood_scale={ood_scale} must be > 0 (1 = the model's threshold)")
        if isinstance(model_path, OnnxScorer):
            self.model = model_path
        else:
            self.model = OnnxScorer(
                model_path if model_path is not None else bundled_model_path(), threads=threads
            )
        #: the swap thresholds (per memory budget B where the model has a dev frontier for it)
        self.thresholds = resolve_thresholds(min_gain, self.model, second_pass_share=second_pass_share)
        self.min_gain, self.min_gain_source = self.thresholds.default, self.thresholds.source
        self.second_pass_share = float(second_pass_share)
        window = check_window(share_window)
        #: the deployment-rate threshold (None: fixed thresholds)
        self.deployment = (
            DeploymentThreshold(self.thresholds, self.second_pass_share, window)
            if window is not None and min_gain == "auto"
            else None
        )
        self.beam_width = beam_width
        self.inverted = inverted
        self.thumbnail_size = thumbnail_size
        self.ood_guard = ood_guard and self.model.ood is not None
        self.ood_scale = float(ood_scale)
        guard = self.model.ood
        #: the deployment-refitted guard (None: the model's guard on every decision)
        self.refit = (
            RefitGuard(guard, warmup)
            if (warmup := check_refit(ood_refit)) is not None and isinstance(guard, RobustGuard)
            else None
        )
        #: the covariate guard does not judge during the refit's warm-up (``ood_refit_warmup: open``)
        self.open_warmup = ood_refit_warmup == "open"
        self.witness_check = bool(witness_check)
        if inverted:
            self.name = "selector_inverted"
        self.screen_text = screen_text
        self.line_boxes: Any = None  # get_lines(sha) beside the archive's text (use_line_boxes)
        self._plain = FeatureExtractor(screen_text=screen_text)  # for archives it reads nothing from
        self._extractor = self._plain
        self._archive: object | None = None
        # guards only the (archive -> extractor) binding; never held during feature extraction or I/O
        self._lock = threading.Lock()

    def use_screen_text(self, source: ScreenTextSource | None) -> None:
        """Read screen text from ``source`` from now on (None: ``ctx.archive``'s ``get_text``, if any)."""
        with self._lock:
            self.screen_text = source
            self._archive = None
            self._plain = self._extractor = FeatureExtractor(screen_text=source)

    def use_line_boxes(self, lines: Any) -> None:
        """Read each screen's line boxes from ``lines(sha256)`` (the memory's screen-text writer's
        ``get_lines``) beside the text the archive stores, when no ``screen_text`` source was given."""
        with self._lock:
            self.line_boxes = lines
            self._archive = None  # rebind on the next decision

    def _extractor_for(self, archive: object | None) -> FeatureExtractor:
        """The feature extractor bound to ``archive``: its thumbnails when the model uses images, its
        ``get_text`` when no ``screen_text`` source was given."""
        images = archive is not None and self.model.image_features and hasattr(archive, "open_image")
        text = self.screen_text is None and archive_screen_text(archive) is not None
        if not images and not text:
            return self._plain  # nothing to read from this archive
        old = None
        with self._lock:
            if archive is not self._archive:
                old = getattr(self._extractor, "thumbnails", None)
                self._archive = archive
                thumbs = None
                if images:
                    from causalcache_memory.archive.thumbs import ThumbnailCache

                    thumbs = ThumbnailCache(archive, size=self.thumbnail_size)  # type: ignore[arg-type]
                source: Any = archive if text else self.screen_text
                if text and self.line_boxes is not None:
                    source = TextWithLines(archive, self.line_boxes)
                self._extractor = FeatureExtractor(thumbs, screen_text=source)
            extractor = self._extractor
        close = getattr(old, "close", None)
        if close is not None:
            close()
        return extractor

    def prepare(self, archive: ScreenshotArchive, sha256: str) -> None:
        """Start decoding screenshot ``sha256``'s thumbnail in the background (optional allocator hook).

        The controller calls this when a screenshot is archived, so the decode overlaps the pass-1 model
        call; the next :meth:`allocate` finds the thumbnail cached, or waits for the running decode. It
        never waits for a running allocation (which may be stalled on a slow read).
        """
        thumbs = self._extractor_for(archive).thumbnails
        prefetch = getattr(thumbs, "prefetch", None)
        if prefetch is not None:
            prefetch(sha256)

    def close(self) -> None:
        """Stop the thumbnail prefetch thread, if one was started."""
        close = getattr(self._extractor.thumbnails, "close", None)
        if close is not None:
            close()

    def allocate(self, ctx: AllocationContext) -> Allocation:
        t, budget = ctx.t, ctx.budget
        nothing_to_swap = budget == 0 or exact_b_size(t, budget) == t - 1  # no slot, or all in Recent-B
        if nothing_to_swap:
            return self.decide(None, t=t, budget=budget, witness=ctx.witness)
        extractor = self._extractor_for(ctx.archive)
        events = extractor(ctx.trace, budget, ctx.witness)
        sources = (
            witness_sources(extractor.screen_text, ctx.trace, budget, ctx.witness)
            if self.witness_check
            else ()
        )
        return self.decide(events, t=t, budget=budget, witness=ctx.witness, sources=sources)

    def decide(
        self,
        events: np.ndarray | None,
        *,
        t: int,
        budget: int,
        witness: Action | None,
        sources: tuple[int, ...] = (),
    ) -> Allocation:
        """The decision rule on featurized events: OOD guard -> scorer -> exact-B beam from Recent-B.

        Args:
            events: ``(t-1, NUM_FEATURES)`` per-event features of the trace at ``t`` with ``witness`` as
                reference action (:class:`FeatureExtractor`); None only when nothing lies outside
                Recent-B (``min(B, t-1) = t-1``), where the answer is Recent-B without features.
            t, budget: the decision index and ``B``.
            witness: the reference action (the pass-1 proposal), for the context features.
            sources: the witness sources of the witness-source check (events of Recent-B a set may not
                displace; :func:`~causalcache_memory.selector.witness_check.witness_sources`), ``()``
                for none.

        Returns the exact-B allocation; ``info`` holds ``min_gain`` (the threshold used at this ``B``;
        ``"inf"`` when the deployment's share admits no swap) and ``threshold_from`` (``fixed``, ``dev``
        during the deployment rule's warm-up, or ``deployment``), ``top_gain`` (the best first swap's
        predicted gain, which the threshold is compared with),
        ``predicted_gain`` (the beam's predicted gain over Recent-B), ``promoted_gain`` (on a swap: each
        promoted event's predicted gain when swapped in for the oldest recent event, by event index as a
        string), and ``ood_distance`` /
        ``fallback: "ood"`` when the guard ran (``ood_masked``: the mask pattern, when it judged the state
        without some feature groups; on a declined state ``ood_group``, the feature group with the largest
        share of the distance, and ``ood_groups``, every group's share: :mod:`.ood_explain`), and ``witness_kept`` (the held witness sources) when the witness-source check refused the first set,
        and ``masked`` on every decision that was featurized: the groups the
        model reads (``OnnxScorer.read_groups``) that no event of the trace had, e.g. ``"text"`` or
        ``"app+text"`` (absent when every such group was available somewhere).
        """
        recent = recent_b(t, budget)
        if self.deployment is not None:
            min_gain, source = self.deployment.threshold(budget)
        else:
            min_gain, source = self.thresholds.for_budget(budget), "fixed"
        info: dict[str, Any] = {
            "min_gain": min_gain if min_gain != float("inf") else "inf",
            "threshold_from": source,
            "predicted_gain": 0.0,
        }
        if len(recent) == t - 1 or budget == 0:  # nothing outside Recent-B, or no slot: no swap to consider
            return make_allocation(recent, t=t, budget=budget, allocator=self.name, info=info)
        if events is None:
            raise SelectorError(f"decide(t={t}, budget={budget}) needs the events' features")
        summary = state_summary(events, self.model.drop_index)
        missing = state_pattern(summary, self.model.read_groups)
        if missing:  # groups the model reads whose source is missing on every event (e.g. "text")
            info["masked"] = missing
        if self.ood_guard:
            guard = self.model.ood
            assert guard is not None
            if self.refit is not None:
                guard = self.refit.observe(summary)
                info["ood_refit"] = "refit" if self.refit.refitted else "warmup"
            if self.open_warmup and not (self.refit is not None and self.refit.refitted):
                return self._search(events, t=t, budget=budget, witness=witness, sources=sources, info=info)
            out, distance = guard.is_ood(summary, scale=self.ood_scale)
            info["ood_distance"] = round(distance, 4) if distance != float("inf") else "inf"
            masked = guard.pattern(summary) if isinstance(guard, RobustGuard) else ""
            if masked:  # judged without these feature groups (their sources are missing)
                info["ood_masked"] = masked
            if out:
                info["fallback"] = "ood"
                if isinstance(guard, RobustGuard):  # which feature group made it far (warnings name it)
                    shares = group_contributions(guard, summary)
                    if shares:
                        info["ood_group"] = far_group(shares)
                        info["ood_groups"] = shares
                return make_allocation(recent, t=t, budget=budget, allocator=self.name, info=info)
        return self._search(events, t=t, budget=budget, witness=witness, sources=sources, info=info)

    def _search(
        self,
        events: np.ndarray,
        *,
        t: int,
        budget: int,
        witness: Action | None,
        sources: tuple[int, ...],
        info: dict[str, Any],
    ) -> Allocation:
        """Scorer and exact-B beam; a set displacing a witness source is refused and searched again
        with the sources held (the witness-source check)."""
        min_gain = float(info["min_gain"])
        scorer = self.model.scorer(
            events, context_features(t, budget, witness), sign=-1.0 if self.inverted else 1.0
        )
        result = beam_search(scorer, t=t, budget=budget, beam_width=self.beam_width, min_gain=min_gain)
        if sources and displaced_sources(sources, result.selected):
            info["witness_kept"] = list(sources)
            result = beam_search(
                scorer, t=t, budget=budget, beam_width=self.beam_width, min_gain=min_gain, hold=sources
            )
        if self.deployment is not None:
            self.deployment.observe(budget, result.top_gain)
        info["predicted_gain"] = round(result.gain, 6)
        if result.top_gain != float("-inf"):
            info["top_gain"] = round(result.top_gain, 6)
        recent = recent_b(t, budget)
        promoted = [j for j in result.selected if j < t - len(recent) and j in result.scores]
        if promoted:  # why each restored step: its first-swap gain (B entries at most; the report shows it)
            info["promoted_gain"] = {str(j): round(result.scores[j], 6) for j in promoted}
        return make_allocation(
            result.selected, t=t, budget=budget, allocator=self.name, scores=result.scores, info=info
        )
