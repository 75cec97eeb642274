"""The registry of screen generators: how each lays out a state and writes its screen text.

=============  ==========  =========================================  ===========================================
generator      size        screen grammar                              screen text format
=============  ==========  =========================================  ===========================================
``desktop``    640 x 400   menu bar + clock, one window with a title   accessibility dump, one element a line:
                           bar, taskbar with app buttons, tray clock   ``role "name" [x0,y0,x1,y1]`` (indented
                           and date; property lists, a dense           inside the window)
                           spreadsheet grid (up to ~300 elements)
``web``        480 x 720   browser tab strip, URL bar, site nav,       OCR lines with chrome: one line per visual
                           long paged lists (``Scroll down``), ``<dl>``  row, elements joined by two spaces, and
                           label/value pairs on two rows, footer       deterministic OCR confusions (``O``->``0``)
``mobile``     270 x 480   status bar (clock, battery), app bar,       Android view hierarchy XML: one ``<node``
                           cards with small text, bottom navigation    ``text= resource-id= class= bounds=[..][..]``
                           (5-25 elements)                             a line
=============  ==========  =========================================  ===========================================
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from causalcache_lab.worlds_ext.screen import Screen

__all__ = ["ALL_GENERATORS", "GENERATORS", "SEALED_GENERATORS", "Generator", "generator"]


@dataclass(frozen=True)
class Generator:
    """A screen generator: ``layout(task, state) -> Screen`` and ``serialize(screen) -> str``."""

    name: str
    size: tuple[int, int]
    text_format: str
    layout: Callable[[Any, Any], Screen]
    serialize: Callable[[Screen], str]
    list_rows: int


def _registry() -> dict[str, Generator]:
    from causalcache_lab.worlds_ext import desktop, mobile, terminal, web

    return {
        "desktop": Generator("desktop", desktop.SIZE, "a11y-dump", desktop.layout, desktop.serialize,
                             desktop.LIST_ROWS),
        "web": Generator("web", web.SIZE, "ocr-lines", web.layout, web.serialize, web.LIST_ROWS),
        "mobile": Generator("mobile", mobile.SIZE, "android-xml", mobile.layout, mobile.serialize,
                            mobile.LIST_ROWS),
        "terminal": Generator("terminal", terminal.SIZE, "terminal-buffer", terminal.layout, terminal.serialize,
                              terminal.LIST_ROWS),
    }  # fmt: skip


#: the development generators; ``terminal`` is sealed (docs/sealed/generators-v1.yaml) and not listed here
GENERATORS = ("desktop", "web", "mobile")
SEALED_GENERATORS = ("terminal",)
ALL_GENERATORS = GENERATORS + SEALED_GENERATORS
_CACHE: dict[str, Generator] = {}


def generator(name: str) -> Generator:
    """The generator called ``name`` (``desktop``, ``web`` or ``mobile``)."""
    if not _CACHE:
        _CACHE.update(_registry())
    if name not in _CACHE:
        raise ValueError(f"generator={name!r} is unknown; choose one of {', '.join(ALL_GENERATORS)}")
    return _CACHE[name]
