"""The ``mobile`` generator: phone screens of cards, and an Android view hierarchy as screen text.

Screen (270 x 480): a status bar (clock, ``5G``, battery), an app bar (title), cards (a label on the
left and its value on the right of one row, a small caption row below), a bottom navigation bar
(``Home Search Profile``). 5-25 text elements a screen. The launcher is a grid of app icons. Text
format: a uiautomator-style dump, one ``<node .../>`` a line, containers included::

    <?xml version='1.0' encoding='UTF-8' standalone='yes' ?>
    <hierarchy rotation="0">
      <node index="0" text="9:52" resource-id="com.android.systemui:id/clock" class="android.widget.TextView"
            package="com.example.wallet" clickable="false" bounds="[6,2][40,14]" />
      ...
    </hierarchy>

(each node on one line in the real text).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causalcache_lab.worlds_ext.content import FORM_FIELDS, FORM_OPEN
from causalcache_lab.worlds_ext.screen import Element, Screen, screen_clock

if TYPE_CHECKING:
    from causalcache_lab.worlds_ext.env import ExtState
    from causalcache_lab.worlds_ext.tasks import ExtTask

__all__ = ["LIST_ROWS", "SIZE", "layout", "serialize"]

SIZE = (270, 480)
LIST_ROWS = 12
_CLASS = {
    "statusbar": "android.widget.FrameLayout",
    "appbar": "android.view.ViewGroup",
    "card": "androidx.cardview.widget.CardView",
    "button": "android.widget.Button",
    "field": "android.widget.EditText",
    "nav": "com.google.android.material.bottomnavigation.BottomNavigationView",
    "icon": "android.widget.ImageView",
}


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text.lower()).strip("_") or "view"


def layout(task: ExtTask, s: ExtState) -> Screen:
    """The phone screen of state ``s``."""
    pkg = f"com.example.{_slug(s.app or 'launcher')}"
    els = [
        Element("statusbar", "", (0, 0, 270, 15), rid="com.android.systemui:id/status_bar"),
        Element("text", screen_clock(s.step), (6, 2, 40, 14), rid="com.android.systemui:id/clock"),
        Element("text", "5G", (200, 2, 220, 14), rid="com.android.systemui:id/mobile_type"),
        Element("text", f"{87 - s.step // 3}%", (230, 2, 266, 14), rid="com.android.systemui:id/battery"),
    ]
    title = "Home"
    if not s.app:
        for k, app in enumerate(task.apps):
            r, c = divmod(k, 3)
            x0, y0 = 12 + 86 * c, 40 + 80 * r
            els.append(Element("icon", "", (x0 + 16, y0, x0 + 56, y0 + 40), rid=f"{pkg}:id/icon"))
            els.append(Element("text", app.name, (x0, y0 + 44, x0 + 76, y0 + 56), rid=f"{pkg}:id/label",
                               on_click=f"nav:{app.name}"))  # fmt: skip
    else:
        app = task.app(s.app)
        title = {"home": s.app, "item": s.item or "", "form": FORM_OPEN}.get(s.view, s.app)
        els.append(Element("appbar", "", (0, 16, 270, 44), rid=f"{pkg}:id/toolbar"))
        els.append(Element("text", title, (12, 22, 200, 36), rid=f"{pkg}:id/title"))
        y = 52
        if s.view == "home":
            els.append(Element("button", FORM_OPEN, (190, 20, 266, 40), rid=f"{pkg}:id/fab", on_click="form"))
            rows = app.listing[s.scroll * LIST_ROWS : (s.scroll + 1) * LIST_ROWS]
            for name in rows:
                it = app.item(name)
                els.append(Element("card", "", (6, y, 264, y + 30), rid=f"{pkg}:id/row"))
                els.append(
                    Element(
                        "text", name, (12, y + 2, 180, y + 14), rid=f"{pkg}:id/name", on_click=f"open:{name}"
                    )
                )
                if it is not None:
                    els.append(
                        Element("text", it.summary, (12, y + 16, 180, y + 28), rid=f"{pkg}:id/subtitle")
                    )
                y += 34
        elif s.view == "item" and s.item and (it := app.item(s.item)):
            for label, value in it.fields:
                els.append(Element("card", "", (6, y, 264, y + 32), rid=f"{pkg}:id/card"))
                els.append(
                    Element("text", label, (12, y + 3, 130, y + 15), rid=f"{pkg}:id/{_slug(label)}_label")
                )
                els.append(Element("text", value, (140, y + 3, 260, y + 15), rid=f"{pkg}:id/{_slug(label)}"))
                els.append(
                    Element("text", "Updated today", (12, y + 18, 130, y + 30), rid=f"{pkg}:id/caption")
                )
                y += 38
        elif s.view == "form":
            for name in FORM_FIELDS.values():
                els.append(Element("text", name, (12, y, 120, y + 12), rid=f"{pkg}:id/{_slug(name)}_label"))
                els.append(Element("field", s.form.get(name, ""), (12, y + 14, 258, y + 34),
                                   rid=f"{pkg}:id/{_slug(name)}_input", on_click=f"field:{name}"))  # fmt: skip
                y += 42
            els.append(
                Element(
                    "button", "Submit", (12, y + 4, 120, y + 26), rid=f"{pkg}:id/submit", on_click="submit"
                )
            )
    els.append(Element("nav", "", (0, 448, 270, 480), rid=f"{pkg}:id/bottom_nav"))
    for k, name in enumerate(("Home", "Search", "Profile")):
        els.append(
            Element("text", name, (20 + 90 * k, 456, 80 + 90 * k, 470), rid=f"{pkg}:id/nav_{name.lower()}")
        )
    return Screen("mobile", SIZE, tuple(els), s.app, title, background=(250, 250, 250))


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def serialize(screen: Screen) -> str:
    """The view-hierarchy dump of ``screen`` (module docstring)."""
    pkg = f"com.example.{_slug(screen.app or 'launcher')}"
    lines = ["<?xml version='1.0' encoding='UTF-8' standalone='yes' ?>", '<hierarchy rotation="0">']
    for i, e in enumerate(screen.elements):
        cls = _CLASS.get(e.role, "android.widget.TextView")
        x0, y0, x1, y1 = e.box
        lines.append(
            f'  <node index="{i}" text="{_esc(e.text)}" resource-id="{e.rid}" class="{cls}" package="{pkg}" '
            f'content-desc="" clickable="{"true" if e.on_click else "false"}" bounds="[{x0},{y0}][{x1},{y1}]" />'
        )
    lines.append("</hierarchy>")
    return "\n".join(lines)
