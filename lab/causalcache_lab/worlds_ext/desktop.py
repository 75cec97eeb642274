"""The ``desktop`` generator: one window with chrome, and an accessibility dump as its screen text.

Screen (640 x 400): a menu bar (``File Edit View Window Help`` and a clock), the foreground app's window
(title bar ``<App> - <title>``, content), a taskbar (``Start``, one button per app, the tray clock
``9:52 AM`` and the date). Content: the app's list (name and a summary column, ``New entry``), an item's
property list (label and value on one row), a spreadsheet grid (four label/value pairs a row, up to
~300 elements on the screen) or the form. Text format (one element a line, window children indented)::

    menubar "" [0,0,640,14]
    menuitem "File" [4,1,30,13]
    ...
    window "Bank - Ruby Savings" [8,18,632,374]
      statictext "Balance" [24,52,200,64]
      statictext "$12,034.10" [220,52,420,64]
    ...
    button "Bank" [110,380,170,398]
    statictext "9:52 AM" [560,380,636,398]
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causalcache_lab.worlds_ext.content import FORM_FIELDS, FORM_OPEN
from causalcache_lab.worlds_ext.screen import Element, Screen, screen_clock

if TYPE_CHECKING:
    from causalcache_lab.worlds_ext.env import ExtState
    from causalcache_lab.worlds_ext.tasks import ExtTask

__all__ = ["LIST_ROWS", "SIZE", "layout", "serialize"]

SIZE = (640, 400)
LIST_ROWS = 24
_TOP, _ROW, _GRID_ROW = 50, 13, 11
_MENUS = ("File", "Edit", "View", "Window", "Help")


def _chrome(task: ExtTask, step: int) -> list[Element]:
    out = [Element("menubar", "", (0, 0, 640, 14))]
    x = 4
    for m in _MENUS:
        out.append(Element("menuitem", m, (x, 1, x + 6 * len(m) + 6, 13)))
        x += 6 * len(m) + 14
    out.append(Element("statictext", f"Mon {screen_clock(step)}", (560, 1, 636, 13)))
    return out


def _taskbar(task: ExtTask, step: int) -> list[Element]:
    out = [Element("taskbar", "", (0, 378, 640, 400)), Element("button", "Start", (2, 380, 40, 398))]
    x = 46
    for app in task.apps:
        out.append(Element("button", app.name, (x, 380, x + 62, 398), on_click=f"nav:{app.name}"))
        x += 66
    out.append(Element("statictext", screen_clock(step, twelve=True), (500, 380, 556, 398)))
    out.append(Element("statictext", "2026-12-07", (560, 380, 636, 398)))
    return out


def layout(task: ExtTask, s: ExtState) -> Screen:
    """The desktop screen of state ``s``."""
    els = _chrome(task, s.step)
    title = "Desktop"
    if s.app:
        app = task.app(s.app)
        title = {"home": s.app, "item": s.item or "", "form": FORM_OPEN}.get(s.view, s.app)
        els.append(Element("window", f"{s.app} - {title}", (8, 18, 632, 374)))
        els.append(Element("titlebar", f"{s.app} - {title}", (8, 18, 632, 32)))
        els.append(Element("button", "Close", (590, 19, 630, 31)))
        y = _TOP
        if s.view == "home":
            els.append(Element("button", FORM_OPEN, (520, 36, 624, 48), on_click="form"))
            els.append(Element("header", "Name", (20, 36, 300, 48)))
            els.append(Element("header", "Updated", (310, 36, 500, 48)))
            rows = app.listing[s.scroll * LIST_ROWS : (s.scroll + 1) * LIST_ROWS]
            for name in rows:
                it = app.item(name)
                els.append(Element("listitem", name, (20, y, 300, y + _ROW - 1), on_click=f"open:{name}"))
                els.append(Element("statictext", it.summary if it else "", (310, y, 500, y + _ROW - 1)))
                y += _ROW
        elif s.view == "item" and s.item and (it := app.item(s.item)):
            els.append(Element("heading", it.name, (20, 36, 400, 48)))
            if app.grid:
                for k, (label, value) in enumerate(it.fields):
                    r, c = divmod(k, 4)
                    x0, y0 = 16 + 152 * c, y + r * _GRID_ROW
                    els.append(Element("cell", label, (x0, y0, x0 + 84, y0 + _GRID_ROW - 1)))
                    els.append(Element("cell", value, (x0 + 84, y0, x0 + 150, y0 + _GRID_ROW - 1)))
            else:
                for label, value in it.fields:
                    els.append(Element("statictext", label, (24, y, 200, y + _ROW - 1)))
                    els.append(Element("statictext", value, (220, y, 420, y + _ROW - 1)))
                    y += _ROW
        elif s.view == "form":
            els.append(Element("heading", FORM_OPEN, (20, 36, 400, 48)))
            for name in FORM_FIELDS.values():
                els.append(Element("label", name, (24, y, 120, y + 15)))
                els.append(
                    Element("field", s.form.get(name, ""), (130, y, 420, y + 15), on_click=f"field:{name}")
                )
                y += 20
            els.append(Element("button", "Submit", (130, y + 6, 210, y + 22), on_click="submit"))
    return Screen("desktop", SIZE, tuple(els + _taskbar(task, s.step)), s.app, title)


def serialize(screen: Screen) -> str:
    """The accessibility dump of ``screen`` (module docstring)."""
    lines = []
    inside = False
    for e in screen.elements:
        if e.role == "taskbar":
            inside = False
        indent = "  " if inside and e.role != "window" else ""
        x0, y0, x1, y1 = e.box
        lines.append(f'{indent}{e.role} "{e.text}" [{x0},{y0},{x1},{y1}]')
        if e.role == "window":
            inside = True
    return "\n".join(lines)
