"""A 40-step 1920x1080 desktop episode with pixel-exact ground-truth text (the ``ocr`` bench scenario).

:func:`desktop_episode` draws the screens of one agent episode on a desktop with three apps (Mail,
Editor, Orders) and a taskbar, with the changes an agent's steps make between screens: selecting
messages (the reading pane changes), typing (a line grows), dialogs opening and closing, scrolling a
table, searching (the table is filtered) and app switches (the whole window changes). Every string is
drawn with PIL's scalable default font at ``font_px`` pixels, and the generator returns, per screen, the
exact strings it drew and where (:class:`DrawnLine`): the ground truth of that screen's text.

Each step also carries the agent's click (relative coordinates), on the element the step acts on, so the
selector can be run on the episode as a trace (its witness label lookup reads ``get_lines`` boxes).
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DrawnLine", "EpisodeScreen", "desktop_episode", "words"]

SIZE = (1920, 1080)
_FIRST = "Anna Ben Carla Dmitri Elena Farid Greta Hugo Ines Jonas Kara Liam Mona Nils Olga".split()
_LAST = "Berger Costa Dietz Evans Fischer Garcia Horn Ivanov Jensen Keller Lopez Meyer".split()
_ITEMS = "Desk Lamp|Office Chair|Monitor Arm|USB Hub|Laptop Stand|Keyboard|Webcam|Headset|Cable Kit".split(
    "|"
)
_TOPICS = "Invoice|Delivery date|Refund request|Meeting notes|Contract draft|Travel plan|Budget review".split(
    "|"
)
_PROSE = (
    "please find the updated figures attached and confirm the totals before friday so that accounting "
    "can close the quarter we moved the delivery to the second week because the supplier is late the "
    "customer asked for a partial refund on the damaged items and a new invoice for the rest"
).split()


@dataclass(frozen=True)
class DrawnLine:
    """One string drawn on a screen: its text and pixel box ``(x0, y0, x1, y1)``."""

    text: str
    box: tuple[int, int, int, int]


@dataclass
class EpisodeScreen:
    """One screen of the episode: encoded PNG, the lines drawn, and the step's click (relative)."""

    png: bytes
    lines: list[DrawnLine]
    action: str
    click: tuple[float, float]
    app: str
    change: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return "\n".join(line.text for line in self.lines)


def words(text: str) -> list[str]:
    """Normalized words of ``text`` (lower case, surrounding punctuation stripped, empties dropped)."""
    out = []
    for raw in text.split():
        word = raw.strip("\"'.,;:!?()[]{}<>|").lower()
        if word:
            out.append(word)
    return out


class _Canvas:
    def __init__(self, font_px: int) -> None:
        from PIL import Image, ImageDraw, ImageFont

        self.image = Image.new("RGB", SIZE, (58, 92, 128))
        self.draw = ImageDraw.Draw(self.image)
        self.font = ImageFont.load_default(size=font_px)
        self.bold = ImageFont.load_default(size=font_px + 4)
        self.lines: list[DrawnLine] = []

    def text(self, xy: tuple[int, int], text: str, fill: Any = (25, 25, 30), big: bool = False) -> DrawnLine:
        font = self.bold if big else self.font
        self.draw.text(xy, text, fill=fill, font=font)
        x0, y0, x1, y1 = self.draw.textbbox(xy, text, font=font)
        line = DrawnLine(text, (int(x0), int(y0), int(x1), int(y1)))
        self.lines.append(line)
        return line

    def rect(self, box: tuple[int, int, int, int], fill: Any, outline: Any = None) -> None:
        self.draw.rectangle(box, fill=fill, outline=outline)

    def png(self) -> bytes:
        buf = io.BytesIO()
        self.image.save(buf, format="PNG", compress_level=1)
        return buf.getvalue()


@dataclass
class _State:
    app: str = "Mail"
    selected: int = 0
    typed: list[str] = field(default_factory=list)
    editor_lines: list[str] = field(default_factory=list)
    scroll: int = 0
    query: str = ""
    dialog: tuple[str, str, str] | None = None
    reply: list[str] = field(default_factory=list)
    minute: int = 2


class _World:
    """The apps' content (seeded) and the drawing of one screen from a :class:`_State`."""

    def __init__(self, seed: int, font_px: int) -> None:
        rng = random.Random(seed)
        self.font_px = font_px
        self.mails = [
            (
                f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
                f"{rng.choice(_TOPICS)} {rng.randrange(100, 999)}",
                [" ".join(rng.choice(_PROSE) for _ in range(9)).capitalize() for _ in range(6)],
            )
            for _ in range(12)
        ]
        self.orders = [
            (
                f"SO-{rng.randrange(10000, 99999)}",
                f"{rng.choice(_FIRST)} {rng.choice(_LAST)}",
                rng.choice(_ITEMS),
                f"{rng.randrange(2, 40)}",
                f"EUR {rng.randrange(10, 900)}.{rng.randrange(0, 99):02d}",
                rng.choice(("Shipped", "Pending", "Delivered", "Returned")),
            )
            for _ in range(60)
        ]
        self.doc = [" ".join(rng.choice(_PROSE) for _ in range(10)).capitalize() for _ in range(14)]
        self.prose = _PROSE

    def draw(self, state: _State) -> tuple[bytes, list[DrawnLine], dict[str, tuple[float, float]]]:
        c = _Canvas(self.font_px)
        targets: dict[str, tuple[float, float]] = {}
        w, h = SIZE
        c.rect((0, h - 44, w, h), fill=(30, 34, 40))
        for i, app in enumerate(("Mail", "Editor", "Orders")):
            fill = (90, 110, 150) if app == state.app else (30, 34, 40)
            c.rect((70 + 150 * i, h - 40, 200 + 150 * i, h - 4), fill=fill)
            line = c.text((90 + 150 * i, h - 33), app, fill=(235, 235, 240))
            targets[f"app:{app}"] = _centre(line.box)
        c.text((w - 120, h - 33), f"17:{state.minute:02d}", fill=(235, 235, 240))
        x0, y0, x1, y1 = 60, 40, 1860, 1000
        c.rect((x0, y0, x1, y1), fill=(252, 252, 252), outline=(120, 120, 130))
        c.rect((x0, y0, x1, y0 + 44), fill=(225, 229, 236))
        title = {
            "Mail": "Inbox - Mail",
            "Editor": "report.txt - Editor",
            "Orders": "Sales Orders - Backoffice",
        }
        c.text((x0 + 20, y0 + 10), title[state.app], big=True)
        for i, menu in enumerate(("File", "Edit", "View", "Tools", "Help")):
            c.text((x0 + 20 + 90 * i, y0 + 56), menu, fill=(60, 60, 70))
        body_y = y0 + 100
        getattr(self, f"_{state.app.lower()}")(c, state, (x0, body_y, x1, y1), targets)
        if state.dialog is not None:
            head, line1, line2 = state.dialog
            dx0, dy0 = 660, 380
            c.lines = [ln for ln in c.lines if not _overlaps(ln.box, (dx0, dy0, dx0 + 600, dy0 + 260))]
            c.rect((dx0, dy0, dx0 + 600, dy0 + 260), fill=(245, 246, 248), outline=(60, 60, 70))
            c.rect((dx0, dy0, dx0 + 600, dy0 + 44), fill=(200, 210, 228))
            c.text((dx0 + 20, dy0 + 10), head, big=True)
            c.text((dx0 + 30, dy0 + 80), line1)
            c.text((dx0 + 30, dy0 + 120), line2)
            for i, label in enumerate(("OK", "Cancel")):
                bx = dx0 + 330 + 130 * i
                c.rect((bx, dy0 + 190, bx + 110, dy0 + 230), fill=(228, 230, 236), outline=(90, 90, 100))
                targets[f"button:{label}"] = _centre(c.text((bx + 30, dy0 + 200), label).box)
        return c.png(), c.lines, targets

    def _mail(self, c: _Canvas, state: _State, area: tuple[int, int, int, int], targets: dict) -> None:
        x0, y0, x1, y1 = area
        split = x0 + 620
        c.rect((split, y0 - 4, split + 2, y1), fill=(200, 200, 205))
        for i, (sender, subject, _) in enumerate(self.mails):
            y = y0 + 64 * i
            if y + 60 > y1:
                break
            if i == state.selected:
                c.rect((x0 + 4, y - 6, split - 4, y + 54), fill=(208, 224, 248))
            targets[f"mail:{i}"] = _centre(c.text((x0 + 24, y), sender).box)
            c.text((x0 + 24, y + 26), subject, fill=(80, 80, 90))
        sender, subject, body = self.mails[state.selected]
        c.text((split + 30, y0), subject, big=True)
        c.text((split + 30, y0 + 40), f"From: {sender}", fill=(80, 80, 90))
        for i, line in enumerate(body):
            c.text((split + 30, y0 + 100 + 34 * i), line)
        if state.reply:
            ry = y0 + 340
            c.rect((split + 24, ry, x1 - 24, ry + 260), fill=(255, 255, 255), outline=(150, 150, 160))
            c.text((split + 36, ry + 12), f"Re: {subject}", fill=(80, 80, 90))
            for i in range(0, len(state.reply), 9):
                c.text((split + 36, ry + 50 + 34 * (i // 9)), " ".join(state.reply[i : i + 9]))
            targets["reply"] = (((split + x1) / 2) / SIZE[0], (ry + 130) / SIZE[1])

    def _editor(self, c: _Canvas, state: _State, area: tuple[int, int, int, int], targets: dict) -> None:
        x0, y0, _, _ = area
        lines = self.doc + state.editor_lines
        for i, line in enumerate(lines[-22:]):
            c.text((x0 + 40, y0 + 36 * i), line)
        typed = " ".join(state.typed)
        if typed:
            c.text((x0 + 40, y0 + 36 * min(len(lines), 22)), typed)
        targets["doc"] = ((x0 + 400) / SIZE[0], (y0 + 36 * min(len(lines), 22) + 10) / SIZE[1])

    def _orders(self, c: _Canvas, state: _State, area: tuple[int, int, int, int], targets: dict) -> None:
        x0, y0, x1, _ = area
        c.rect((x0 + 30, y0, x0 + 530, y0 + 40), fill=(255, 255, 255), outline=(140, 140, 150))
        c.text((x0 + 42, y0 + 9), f"Search: {state.query}" if state.query else "Search orders")
        targets["search"] = ((x0 + 280) / SIZE[0], (y0 + 20) / SIZE[1])
        cols = (0, 170, 440, 700, 790, 980)
        for col, head in zip(cols, ("Order", "Customer", "Item", "Qty", "Total", "Status"), strict=True):
            c.text((x0 + 40 + col, y0 + 64), head, fill=(60, 60, 120))
        rows = [o for o in self.orders if state.query.lower() in " ".join(o).lower()]
        for i, row in enumerate(rows[state.scroll : state.scroll + 20]):
            y = y0 + 104 + 38 * i
            if (state.scroll + i) % 2:  # stripes belong to the rows: a scroll moves them with the rows
                c.rect((x0 + 30, y - 6, x1 - 30, y + 30), fill=(243, 245, 248))
            for col, value in zip(cols, row, strict=True):
                line = c.text((x0 + 40 + col, y), value)
            targets[f"row:{i}"] = _centre(line.box)


def _overlaps(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _centre(box: tuple[int, int, int, int]) -> tuple[float, float]:
    return ((box[0] + box[2]) / 2 / SIZE[0], (box[1] + box[3]) / 2 / SIZE[1])


def _script(world: _World, rng: random.Random) -> list[tuple[str, str, Any]]:
    """The episode's 40 steps: ``(change kind, target key, state update)``."""
    steps: list[tuple[str, str, Any]] = []

    def add(kind: str, target: str, **update: Any) -> None:
        steps.append((kind, target, update))

    add("start", "mail:0")
    for i in (1, 3, 4, 6):
        add("select", f"mail:{i}", selected=i)
    add("dialog", "mail:6", dialog=("Attachment", "invoice_2291.pdf is 2.4 MB", "Open it in the viewer?"))
    add("close dialog", "button:Cancel", dialog=None)
    add("switch app", "app:Editor", app="Editor")
    typed: list[str] = []
    for _ in range(7):
        typed = typed + [rng.choice(world.prose) for _ in range(rng.randrange(2, 5))]
        add("typing", "doc", typed=list(typed))
    add("dialog", "doc", dialog=("Save changes?", "report.txt has unsaved changes.", "Save before closing?"))
    add("close dialog", "button:OK", dialog=None, editor_lines=[" ".join(typed).capitalize()], typed=[])
    add("switch app", "app:Orders", app="Orders")
    for scroll in (3, 6, 9, 12, 15):
        add("scroll", "row:10", scroll=scroll)
    add("dialog", "row:4", dialog=("Order details", "Carrier: DHL Express, 3 parcels", "Mark as shipped?"))
    add("close dialog", "button:OK", dialog=None)
    query = ""
    for ch in "shipp":
        query += ch
        add("typing", "search", query=query, scroll=0)
    add("select", "row:1")
    add("switch app", "app:Mail", app="Mail", minute=3)
    reply: list[str] = []
    for _ in range(4):
        reply = reply + [rng.choice(world.prose) for _ in range(rng.randrange(2, 5))]
        add("typing", "reply", reply=list(reply))
    add("dialog", "reply", dialog=("Send message?", "1 recipient, no attachments.", "Send it now?"))
    add("close dialog", "button:OK", dialog=None, reply=[], selected=2)
    add("switch app", "app:Orders", app="Orders", minute=4)
    add("typing", "search", query="", scroll=0)
    while len(steps) < 40:
        add("scroll", "row:5", scroll=3 * (len(steps) % 5))
    return steps[:40]


def desktop_episode(seed: int = 0, *, steps: int = 40, font_px: int = 18) -> list[EpisodeScreen]:
    """The screens of one episode (at most 40 steps; see the module docstring).

    Screen ``t`` is what the agent sees before its action ``t``; its ``click`` is that action's point
    (relative), on the element the script's next change acts on.
    """
    if not 1 <= steps <= 40:
        raise ValueError(f"steps={steps} must be in 1..40 (the episode's script has 40 steps)")
    world = _World(seed, font_px)
    rng = random.Random(seed + 1)
    state = _State()
    script = _script(world, rng)
    out: list[EpisodeScreen] = []
    for t in range(steps):
        kind, _, update = script[t]
        for key, value in update.items():
            setattr(state, key, value)
        png, lines, targets = world.draw(state)
        nxt = script[t + 1][1] if t + 1 < len(script) else "app:Mail"
        click = targets.get(nxt, (0.5, 0.5))
        out.append(EpisodeScreen(png, lines, f"click {nxt}", click, state.app, kind))
    return out
