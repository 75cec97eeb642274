"""Screen text of the synthetic world's screenshots, read with the world's exact OCR (lab only).

:class:`WorldScreenText` is a :class:`~causalcache_memory.selector.screen_text.ScreenTextSource` over an
archive of world PNGs: ``get_text(sha)`` is the OCR of the archived blob, lines joined by ``"\\n"`` --
the same text :meth:`GuiWorld.screen_text() <causalcache_lab.world.env.GuiWorld.screen_text>`
lists for that screen -- and ``get_lines(sha)`` adds each line's relative box. Labelling, training, the
ladder and the closed-loop evaluation all read the screens through it, so the scorer is trained on the
text it is deployed with. Results are cached per content hash (:class:`~causalcache_lab.world.ocr.
OcrCache`).

:class:`NoScreenText` answers nothing: the closed loop's ``screen_text=False`` runs the selector as a
deployment with neither ``screen_text`` nor OCR would (its ``text_*`` features masked), whatever text the
archive may hold.
"""

from __future__ import annotations

import threading
from typing import Any

from causalcache_lab.world.ocr import OcrCache, OcrResult
from causalcache_memory.errors import ArchiveError

__all__ = ["NoScreenText", "WorldScreenText", "world_screen_text"]


class WorldScreenText:
    """``get_text`` / ``get_lines`` of archived world screenshots (exact OCR; None for unknown hashes)."""

    def __init__(self, archive: Any, maxsize: int = 8192) -> None:
        self.archive = archive
        self._cache = OcrCache(maxsize)
        self._lock = threading.Lock()

    def _ocr(self, sha256: str) -> OcrResult | None:
        try:
            with self._lock:
                return self._cache.get(sha256, lambda: self.archive.get_bytes(sha256))
        except (ArchiveError, KeyError, OSError, ValueError):
            return None

    def get_text(self, sha256: str) -> str | None:
        result = self._ocr(sha256)
        return None if result is None else result.text

    def get_lines(self, sha256: str) -> list[tuple[str, tuple[float, float, float, float]]] | None:
        result = self._ocr(sha256)
        return None if result is None else [(line.text, line.box_rel) for line in result.lines]


def world_screen_text(archive: Any) -> WorldScreenText:
    """The OCR screen-text source for ``archive`` (a recipe or harness factory)."""
    return WorldScreenText(archive)


class NoScreenText:
    """A screen-text source with no text for any screen (``get_text`` is always None).

    Given to the selector in place of the archive's own ``get_text``, it masks the ``text_*`` features
    (zeros, ``text_available = 0``) on every decision, as a deployment without screen text or OCR sees them.
    """

    def get_text(self, sha256: str) -> str | None:
        return None
