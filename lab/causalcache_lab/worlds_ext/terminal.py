"""The ``terminal`` generator (SEALED: docs/sealed/generators-v1.yaml): text-mode apps in a terminal.

Screen (480 x 288): an 80 x 24 character terminal (6 x 12 pixel cells): a tmux-style status line at the
bottom (``[0] 0:bash 1:<app>*`` and a clock), a boxed window (box-drawing border, the title in the top
border), content as fixed-width rows: the app's list (an index, the name, dot leaders and a summary),
an item (``Label:`` padded to a column, then the value; one row each), the form (``Label: [value   ]``
fields and ``< Submit >``). Each run of text is one element (the border, the title, a row's text). Text format: the terminal buffer as
``tmux capture-pane -p`` gives it (one line per row, trailing blanks stripped, box drawing kept).

Never run in an evaluation before the final sealed table; its unit tests only check its invariants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from causalcache_lab.worlds_ext.content import FORM_FIELDS, FORM_OPEN
from causalcache_lab.worlds_ext.screen import Element, Screen, screen_clock

if TYPE_CHECKING:
    from causalcache_lab.worlds_ext.env import ExtState
    from causalcache_lab.worlds_ext.tasks import ExtTask

__all__ = ["LIST_ROWS", "SIZE", "layout", "serialize"]

COLS, ROWS, CW, CH = 80, 24, 6, 12
SIZE = (COLS * CW, ROWS * CH)
LIST_ROWS = 18


def _row(r: int, text: str, on_click: str | None = None, col: int = 0, width: int | None = None) -> Element:
    width = width if width is not None else len(text)
    return Element("text", text, (col * CW, r * CH, (col + width) * CW, (r + 1) * CH - 1), on_click=on_click)


def layout(task: ExtTask, s: ExtState) -> Screen:
    """The terminal screen of state ``s``."""
    title = s.app or "shell"
    els: list[Element] = []
    if not s.app:
        els.append(_row(0, "$ ls ~/apps"))
        els.append(_row(1, "  ".join(a.name.lower() for a in task.apps)))
        for k, app in enumerate(task.apps):
            els.append(_row(3 + k, app.name, on_click=f"nav:{app.name}", col=2))
        els.append(_row(3 + len(task.apps) + 1, "$ _"))
    else:
        app = task.app(s.app)
        head = {"home": s.app, "item": s.item or "", "form": FORM_OPEN}.get(s.view, s.app)
        title = head
        lead = f"┌─ {s.app}:"
        els.append(_row(0, lead))
        els.append(_row(0, head, col=len(lead) + 1))  # the title: its own span, as a terminal cell run
        rest = len(lead) + 2 + len(head)
        els.append(_row(0, "─" * (COLS - 1 - rest) + "┐", col=rest))
        for r in range(1, ROWS - 2):
            els.append(_row(r, "│"))
        r = 2
        if s.view == "home":
            els.append(_row(1, FORM_OPEN, on_click="form", col=2))
            rows = app.listing[s.scroll * LIST_ROWS : (s.scroll + 1) * LIST_ROWS]
            for k, name in enumerate(rows):
                it = app.item(name)
                summary = it.summary if it is not None else "archived"
                idx = s.scroll * LIST_ROWS + k + 1
                els.append(_row(r, f"{idx:>3}", col=2))
                els.append(_row(r, name, on_click=f"open:{name}", col=7))
                els.append(_row(r, f"{'.' * max(2, 40 - len(name))} {summary}", col=8 + len(name)))
                r += 1
        elif s.view == "item" and s.item and (it := app.item(s.item)):
            for label, value in it.fields[: ROWS - 4]:
                els.append(_row(r, f"{label + ':':<22} {value}", col=2))
                r += 1
        elif s.view == "form":
            for name in FORM_FIELDS.values():
                els.append(_row(r, f"{name + ':':<12}", col=2))
                els.append(
                    _row(r, s.form.get(name, "").ljust(30, "_"), on_click=f"field:{name}", col=16, width=30)
                )
                r += 2
            els += [_row(r, "<", col=16), _row(r, "Submit", on_click="submit", col=18), _row(r, ">", col=25)]
        els.append(_row(ROWS - 2, "└" + "─" * (COLS - 2) + "┘"))
    tabs = " ".join(
        f"{k}:{n}{'*' if n == (s.app or 'bash') else ''}" for k, n in enumerate(["bash", s.app or ""]) if n
    )
    els.append(_row(ROWS - 1, f"[0] {tabs}".ljust(60) + f"host {screen_clock(s.step)} 07-Dec-26"))
    return Screen("terminal", SIZE, tuple(els), s.app, title, background=(16, 18, 20))


def serialize(screen: Screen) -> str:
    """The terminal buffer (module docstring): the elements of each row laid out by column."""
    lines = [[" "] * COLS for _ in range(ROWS)]
    for e in screen.elements:
        if e.role != "text":
            continue
        r, c = e.box[1] // CH, e.box[0] // CW
        for k, ch in enumerate(e.text[: COLS - c]):
            lines[r][c + k] = ch
    return "\n".join("".join(line).rstrip() for line in lines)
