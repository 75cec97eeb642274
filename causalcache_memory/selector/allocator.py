"""The learned selector as an allocation policy: features -> ONNX set scorer -> exact-B beam.

``LearnedSelectorAllocator().allocate(ctx)`` featurizes the complete trace with ``ctx.witness`` as reference
action (the pass-1 proposal in the two-pass controller), scores conditioning sets with onnxruntime and
returns the beam's exact-B set; ``Recent-B`` when every swap is declined. No torch is imported.
"""

from __future__ import annotations

import threading
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

from causalcache_memory.allocation.base import Allocation, AllocationContext, make_allocation
from causalcache_memory.errors import SelectorError
from causalcache_memory.selector.beam import beam_search
from causalcache_memory.selector.features import FeatureExtractor, context_features
from causalcache_memory.selector.onnx_scorer import OnnxSelector

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["BUNDLED_MODEL", "LearnedSelectorAllocator", "bundled_model_path"]

#: where the bundled scorer lives inside the package
BUNDLED_MODEL = ("causalcache_memory", "assets/selector/selector.onnx")


def bundled_model_path() -> Path:
    """Path of the bundled ``selector.onnx``; :class:`SelectorError` when this build ships none."""
    ref = resources.files(BUNDLED_MODEL[0]).joinpath(BUNDLED_MODEL[1])
    if not ref.is_file():
        raise SelectorError(
            "no bundled selector model: causalcache_memory/assets/selector/selector.onnx is missing from this "
            "installation; pass LearnedSelectorAllocator(model_path=...) with a model trained by "
            "`causalcache train selector`, or install a release that bundles one"
        )
    return Path(str(ref))


class LearnedSelectorAllocator:
    """Learned budget-aware restoration selector (:class:`Allocator`).

    Args:
        model_path: ``.onnx`` file or model directory; None loads the bundled model.
        beam_width: beam size of the exact-B search.
        threads: onnxruntime intra-op threads.
        inverted: negate every predicted marginal (specificity control of the chooser ladder).
        thumbnail_size: side of the thumbnails used for image statistics (needs ``ctx.archive``).
        min_gain: smallest predicted gain for which a swap is taken (0 = the paper's rule; larger values
            decline near-neutral swaps and so fire pass 2 less often).
    """

    name = "causalcache"
    uses_witness = True

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        beam_width: int = 4,
        threads: int = 1,
        inverted: bool = False,
        thumbnail_size: int = 32,
        min_gain: float = 0.0,
    ) -> None:
        if beam_width < 1:
            raise SelectorError(f"beam_width={beam_width} must be >= 1")
        if not min_gain >= 0.0:
            raise SelectorError(f"min_gain={min_gain} must be >= 0")
        self.min_gain = float(min_gain)
        self.model = OnnxSelector(
            model_path if model_path is not None else bundled_model_path(), threads=threads
        )
        self.beam_width = beam_width
        self.inverted = inverted
        self.thumbnail_size = thumbnail_size
        if inverted:
            self.name = "causalcache_inverted"
        self._extractor = FeatureExtractor()
        self._archive: object | None = None
        self._lock = threading.Lock()

    def _extractor_for(self, archive: object | None) -> FeatureExtractor:
        """The feature extractor, with a thumbnail cache bound to ``archive`` (call under ``_lock``)."""
        if archive is not None and archive is not self._archive:
            from causalcache_memory.archive.thumbs import ThumbnailCache

            old = getattr(self._extractor, "thumbnails", None)
            if isinstance(old, ThumbnailCache):
                old.close()
            self._archive = archive
            self._extractor = FeatureExtractor(ThumbnailCache(archive, size=self.thumbnail_size))  # type: ignore[arg-type]
        return self._extractor

    def _features(self, ctx: AllocationContext):  # type: ignore[no-untyped-def]
        with self._lock:
            return self._extractor_for(ctx.archive)(ctx.trace, ctx.budget, ctx.witness)

    def prepare(self, archive: ScreenshotArchive, sha256: str) -> None:
        """Start decoding screenshot ``sha256``'s thumbnail in the background (optional policy hook).

        The controller calls this when a screenshot is archived, so the decode overlaps the pass-1 model
        call; the next :meth:`allocate` finds the thumbnail cached, or waits for the running decode.
        """
        with self._lock:
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
        events = self._features(ctx)
        scorer = self.model.scorer(
            events, context_features(t, budget, ctx.witness), sign=-1.0 if self.inverted else 1.0
        )
        result = beam_search(scorer, t=t, budget=budget, beam_width=self.beam_width, min_gain=self.min_gain)
        return make_allocation(result.selected, t=t, budget=budget, allocator=self.name, scores=result.scores)


from causalcache_memory._deprecated import alias_getattr as _alias_getattr  # noqa: E402

__getattr__ = _alias_getattr(__name__, globals())
