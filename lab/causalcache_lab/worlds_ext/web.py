"""The ``web`` generator: browser pages with long paged lists, and OCR lines with chrome as screen text.

Screen (480 x 720): a tab strip (page title, a clock), the URL bar
(``https://shop.example.com/orders?page=2``), the site's navigation links, the content and a footer.
Content: the site's list (:data:`LIST_ROWS` rows a page among up to ~250 archived entries: ``Scroll down``
pages it), an item's page (on sites with ``two_row``, a ``<dl>``: label on one row, value on the next;
elsewhere ``Label: value`` in one element), or the form. The screen text is what an OCR engine returns:
one line per visual row, the row's elements joined by two spaces, top to bottom, with deterministic
confusions (``O``->``0``, ``l``->``1``, ``rn``->``m``, ``S``->``5`` on about 4% of words).
"""

from __future__ import annotations

import hashlib
import random
from typing import TYPE_CHECKING

from causalcache_lab.worlds_ext.content import APP_SPECS, FORM_FIELDS, FORM_OPEN
from causalcache_lab.worlds_ext.screen import Element, Screen, screen_clock

if TYPE_CHECKING:
    from causalcache_lab.worlds_ext.env import ExtState
    from causalcache_lab.worlds_ext.tasks import ExtTask

__all__ = ["LIST_ROWS", "OCR_NOISE", "SIZE", "layout", "serialize"]

SIZE = (480, 720)
LIST_ROWS = 48
OCR_NOISE = 0.04
_ROW = 12
_TOP = 72
_NAV = ("Home", "Account", "Orders", "Help", "Sign out")
_CONFUSE = (("O", "0"), ("l", "1"), ("rn", "m"), ("S", "5"), ("e", "c"))


def _two_row(app: str) -> bool:
    return next(s.two_row for s in APP_SPECS["web"] if s.name == app)


def _chrome(s: ExtState, title: str) -> list[Element]:
    host = f"{s.app.lower()}.example.com" if s.app else "portal.example.com"
    path = {"home": f"/list?page={s.scroll + 1}", "form": "/new"}.get(s.view, "/")
    if s.view == "item":  # a stable id per item (not hash(): it is salted per process)
        path = f"/item/{int(hashlib.sha256((s.item or '').encode()).hexdigest()[:6], 16) % 9000 + 1000}"
    out = [
        Element("tab", title, (0, 0, 240, 16)),
        Element("statictext", screen_clock(s.step), (440, 2, 478, 14)),
        Element("urlbar", f"https://{host}{path}", (4, 20, 476, 36)),
    ]
    x = 8
    for n in _NAV:
        out.append(Element("link", n, (x, 44, x + 6 * len(n) + 4, 56)))
        x += 6 * len(n) + 16
    return out


def layout(task: ExtTask, s: ExtState) -> Screen:
    """The web page of state ``s``."""
    title = f"{s.app} - {s.item or s.view}" if s.app else "Portal"
    els = _chrome(s, title)
    y = _TOP
    if not s.app:
        els.append(Element("heading", "Your sites", (8, y, 300, y + 12)))
        for k, app in enumerate(task.apps):
            els.append(
                Element(
                    "link", app.name, (8, y + 16 + 14 * k, 200, y + 28 + 14 * k), on_click=f"nav:{app.name}"
                )
            )
    else:
        app = task.app(s.app)
        if s.view == "home":
            rows = app.listing[s.scroll * LIST_ROWS : (s.scroll + 1) * LIST_ROWS]
            first = s.scroll * LIST_ROWS + 1
            els.append(Element("heading", f"{s.app}: {first}-{first + len(rows) - 1} of {len(app.listing)}",
                               (8, y, 300, y + 12)))  # fmt: skip
            els.append(Element("button", FORM_OPEN, (380, y, 472, y + 12), on_click="form"))
            y += 16
            for name in rows:
                it = app.item(name)
                els.append(Element("link", name, (8, y, 300, y + _ROW - 1), on_click=f"open:{name}"))
                if it is not None:
                    els.append(Element("text", it.summary, (320, y, 470, y + _ROW - 1)))
                y += _ROW
        elif s.view == "item" and s.item and (it := app.item(s.item)):
            els.append(Element("heading", it.name, (8, y, 400, y + 12)))
            y += 18
            two = _two_row(s.app)
            for label, value in it.fields:
                if two:
                    els.append(Element("dt", label, (8, y, 300, y + _ROW - 1)))
                    els.append(Element("dd", value, (24, y + _ROW, 300, y + 2 * _ROW - 1)))
                    y += 2 * _ROW + 2
                else:
                    els.append(Element("text", f"{label}: {value}", (8, y, 400, y + _ROW - 1)))
                    y += _ROW
        elif s.view == "form":
            els.append(Element("heading", FORM_OPEN, (8, y, 400, y + 12)))
            y += 18
            for name in FORM_FIELDS.values():
                els.append(Element("label", name, (8, y, 100, y + 12)))
                els.append(
                    Element("field", s.form.get(name, ""), (8, y + 14, 300, y + 28), on_click=f"field:{name}")
                )
                y += 34
            els.append(Element("button", "Submit", (8, y, 80, y + 16), on_click="submit"))
    els.append(Element("text", f"(c) 2026 {s.app or 'Portal'} Inc  Privacy  Terms", (8, 704, 400, 716)))
    return Screen("web", SIZE, tuple(els), s.app, title, background=(255, 255, 255))


def _noisy(word: str, rng: random.Random) -> str:
    if rng.random() >= OCR_NOISE:
        return word
    for a, b in _CONFUSE:
        if a in word:
            return word.replace(a, b, 1)
    return word


def serialize(screen: Screen) -> str:
    """OCR lines of ``screen`` (module docstring); the confusions are fixed per screen content."""
    rng = random.Random(hashlib.sha256(repr(screen.elements).encode()).digest()[:8])
    lines = []
    for row in screen.rows():
        words = "  ".join(e.text for e in row).split(" ")
        lines.append(" ".join(_noisy(w, rng) for w in words))
    return "\n".join(lines)
