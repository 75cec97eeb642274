"""The screen text ``causalcache learn`` featurizes a team's states with, and a warning when there is none.

The deployed selector reads each archived screenshot's text for its ``text_*`` features (the archive's
own ``get_text``: text the screenshot node returned or the memory's OCR stored), and the bundled selector
was trained reading it. ``learn`` must featurize the team's states the same way, or it fine-tunes on
states whose text features are all masked and ships a model that then meets text at deployment: before
this module existed ``learn`` read no text at all, and on the synthetic worlds every learned selector was
fine-tuned that way (RESULTS.md 9f).

Source, in order: ``screen_text: {factory, kwargs}`` in the learn config (``factory(archive, **kwargs)``
returns anything with ``get_text(sha256)``, e.g. an OCR over the archive); else the archive itself when
it can answer ``get_text`` (:func:`~causalcache_memory.selector.screen_text.archive_screen_text`, the rule
the deployed memory and ``train selector --recipe`` follow); else none. :func:`text_coverage` is the share
of training states whose screens have text (``text_available`` on any event); below
:data:`MIN_TEXT_COVERAGE` :func:`coverage_warning` says so, with the fix.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np

from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.features import feature_index
from causalcache_memory.selector.screen_text import archive_screen_text

__all__ = ["MIN_TEXT_COVERAGE", "coverage_warning", "learn_screen_text", "text_coverage"]

logger = logging.getLogger("causalcache_lab.learn")

#: below this share of states with screen text, ``learn`` warns (the memory's own missing-text warning
#: fires at 50% of decisions, ``allocation.idle_warning.missing_text_share``)
MIN_TEXT_COVERAGE = 0.5


def learn_screen_text(spec: Any, archive: Any, trusted: tuple[str, ...] = ()) -> Any:
    """The screen-text source for the team's states: ``spec`` (a ComponentSpec or None) built with the
    archive, else the archive's own ``get_text``, else None (module doc). ``learn`` builds it before any
    labelling, so a factory that cannot be called or returns no ``get_text`` costs nothing: a
    :class:`~causalcache_memory.errors.ConfigError` names the factory and the fix."""
    if spec is None:
        return archive_screen_text(archive)
    from causalcache_lab.selector.recipe import _call

    try:
        source = _call(spec.factory, {"archive": archive, **spec.kwargs}, "screen_text", trusted)
    except TypeError as exc:
        raise ConfigError(
            f"screen_text.factory={spec.factory!r} cannot be called as factory(archive=..., **kwargs) with "
            f"kwargs {sorted(spec.kwargs)}: {exc}; give it an 'archive' keyword argument"
        ) from exc
    if not callable(getattr(source, "get_text", None)):
        raise ConfigError(
            f"screen_text.factory={spec.factory!r} returned {type(source).__name__}, which has no "
            "get_text(sha256) -> str | None; return a screen-text source (e.g. an OCR over the archive)"
        )
    return source


def text_coverage(examples: Sequence[Any]) -> float:
    """Share of ``examples`` (StateExample: ``events (N, F)``) with ``text_available`` on any event; NaN
    for none."""
    if not examples:
        return float("nan")
    col = feature_index("text_available")
    return float(np.mean([bool(np.any(ex.events[:, col] > 0)) for ex in examples]))


def coverage_warning(coverage: float, *, source: Any) -> str | None:
    """The warning for a ``coverage`` below :data:`MIN_TEXT_COVERAGE` (logged), else None."""
    if not coverage < MIN_TEXT_COVERAGE:
        return None
    where = "no screen-text source" if source is None else f"the screen-text source {type(source).__name__}"
    message = (
        f"screen text is known for {coverage:.0%} of the training states ({where}): the selector is trained "
        "with its text_* features masked, and the bundled selector it starts from was trained reading "
        "them. Store screen text with the recording (return screen_text from your screenshot node, or "
        "archive.ocr.engine: rapidocr|tesseract) or give learn a source (screen_text: {factory: "
        "'pkg.module:make', kwargs: {}}, called with archive=...); docs/LEARN.md 'Screen text'"
    )
    logger.warning("causalcache learn: %s", message)
    return message
