"""Build the real-format replay fixtures (tests/fixtures/real_formats): tiny PNGs and one task file each.

Four sources, each with the screen size, action vocabulary and screen-text format of a public dataset
(built from the public formats, no data copied): ``agentnet`` (640x360 desktop, OCR of the whole desktop
with menu bar, clock and taskbar), ``osworld`` (1920x1080 desktop, OSWorld's accessibility-tree table),
``mobileworld`` (1080x2400 phone, OCR with a status bar), ``androidcontrol`` (1080x2400 phone, uiautomator
view-hierarchy XML). Per source two memory-critical tasks (a value shown on one screen, typed many steps
later on another) and one control task (the value typed is on the current screen). Each task file holds
the goal, the split, the actions (relative points), each screen's text and PNG name, ``evidence_event``
(the event whose post-action screen shows the value) and ``use_t`` (the decision that types it).
PNGs are drawn at a tenth of the screen size (a few hundred bytes each).

    python tools/real_format_fixtures.py tests/fixtures/real_formats
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PIL import Image, ImageDraw

SOURCES = {
    "agentnet": ((640, 360), "desktop"),
    "osworld": ((1920, 1080), "desktop"),
    "mobileworld": ((1080, 2400), "mobile"),
    "androidcontrol": ((1080, 2400), "mobile"),
}
_APPS = ("Mail", "Orders", "Notes", "Calendar", "Files", "Chat")
_FILLER = ("Inbox", "Archive", "Settings", "Search", "Recent", "Shared", "Starred", "Help")


def _elements(source: str, app: str, lines: list[str], size: tuple[int, int]) -> list[tuple[str, str, tuple]]:
    """``(role, name, (x0, y0, x1, y1))`` in pixels, one element per content line."""
    w, h = size
    row = h // 24
    return [
        ("label" if i else "heading", text, (w // 10, row * (3 + i), w // 2, row * (4 + i)))
        for i, text in enumerate([app, *lines])
    ]


def screen_text(source: str, app: str, lines: list[str], size: tuple[int, int], minute: int) -> str:
    """One screen's text in the source's format."""
    els = _elements(source, app, lines, size)
    if source == "agentnet":  # desktop OCR: menu bar with a clock, window title, content, taskbar
        clock = f"Mon 7 Dec 10:{minute:02d}"
        return "\n".join(
            [
                f"{app} File Edit View Window Help {clock}",
                f"{app} - Workspace",
                *lines,
                "Start  Browser  Files  Mail",
            ]
        )
    if source == "osworld":
        header = "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)"
        rows = [
            f"{'label' if i else 'heading'}\t{name}\t{name}\t\t\t({x0}, {y0})\t({x1 - x0}, {y1 - y0})"
            for i, (_, name, (x0, y0, x1, y1)) in enumerate(els)
        ]
        return "\n".join([header, "frame\t" + app + "\t\tWindow\t\t(0, 0)\t(1920, 1080)", *rows])
    if source == "mobileworld":
        return "\n".join([f"10:{minute:02d} 5G 85%", *(name for _, name, _ in els)])
    nodes = "".join(
        f'<node index="{i}" text="{name}" resource-id="com.app:id/v{i}" class="android.widget.TextView" '
        f'content-desc="" bounds="[{x0},{y0}][{x1},{y1}]"/>'
        for i, (_, name, (x0, y0, x1, y1)) in enumerate(els)
    )
    return f'<?xml version="1.0"?><hierarchy rotation="0"><node index="0" text="" bounds="[0,0][{size[0]},{size[1]}]">{nodes}</node></hierarchy>'


def _png(path: Path, size: tuple[int, int], seed: int) -> None:
    w, h = max(size[0] // 10, 16), max(size[1] // 10, 16)
    image = Image.new("RGB", (w, h), (230, 230, 235))
    draw = ImageDraw.Draw(image)
    for k in range(3):
        y = (seed * 7 + k * 11) % (h - 4)
        draw.rectangle([2, y, w - 3, y + 3], fill=((seed * 40 + k * 60) % 256, (seed * 17) % 256, 120))
    image.save(path, format="PNG", optimize=True)


def _action(t: int, t_use: int, value: str, source_app: str, target_app: str, platform: str) -> dict:
    """A plausible action mix: open the source app, click to the evidence, leave, open the target app,
    search, scroll, click the field and type the value (relative points)."""
    back = {"type": "back"} if platform == "mobile" else {"type": "hotkey", "keys": ["alt", "tab"]}
    plan = {
        1: {"type": "open_app", "text": source_app},
        2: {"type": "click", "x": 0.3, "y": 0.2},
        3: {"type": "click", "x": 0.32, "y": 0.28},
        4: {"type": "scroll", "x": 0.5, "y": 0.5, "direction": "down"},
        5: back,
        6: {"type": "open_app", "text": target_app},
        7: {"type": "click", "x": 0.25, "y": 0.18},
        8: {"type": "type", "text": "reports", "x": 0.4, "y": 0.1},
        9: {"type": "click", "x": 0.3, "y": 0.36},
        10: {"type": "scroll", "x": 0.5, "y": 0.6, "direction": "down"},
        11: {"type": "click", "x": 0.3, "y": 0.6},
    }
    return plan.get(t, {"type": "type", "text": value, "x": 0.3, "y": 0.6})


def task(source: str, index: int, memory: bool) -> dict:
    """One task: 12 decisions; memory tasks show the value on event 3's screen and type it at t = 12."""
    size, platform = SOURCES[source]
    value = (
        f"INV-{4100 + 37 * index + len(source)}" if index % 2 == 0 else f"{526300 + 11 * index + len(source)}"
    )
    noun = "invoice number" if value.startswith("INV") else "order number"
    source_app, target_app = _APPS[index % 3], _APPS[3 + index % 3]
    item = ("Desk Lamp", "Yoga Mat", "Coffee Grinder")[index % 3]
    steps, screens = [], []
    t_use = 12
    for t in range(1, t_use + 1):
        app = source_app if t <= 4 else target_app
        filler = [f"{_FILLER[(t + k) % len(_FILLER)]}" for k in range(3)]
        lines = filler
        if t == 3 and memory:
            lines = [f"{item}", f"Order {value}" if noun == "order number" else f"Invoice {value}", *filler]
        if not memory and t == t_use - 1:  # control: the value is on the screen the decision sees
            lines = [item, f"Reference {value}", *filler]
        if t == t_use - 1:
            lines = [*lines, f"{noun.capitalize()} field"]
        screens.append(screen_text(source, app, lines, size, t))
        steps.append(_action(t, t_use, value, source_app, target_app, platform))
    goal = (
        f"Find the {noun} of the {item} in {source_app}, then enter it in the {noun} field in {target_app}"
        if memory
        else f"Copy the reference shown in {target_app} for the {item} into its {noun} field"
    )
    return {
        "source": source,
        "platform": platform,
        "screen_size": list(size),
        "goal": goal,
        "split": "memory_critical" if memory else "control",
        "actions": steps,
        "screen_texts": [
            "\n".join([source_app, "Home"])
            if source != "androidcontrol"
            else screen_text(source, "Home", [], size, 0),
            *screens,
        ],
        "evidence_event": 3 if memory else None,
        "use_t": t_use,
    }


def build(root: Path) -> list[Path]:
    out = []
    for source in SOURCES:
        for index, memory in enumerate((True, True, False)):
            spec = task(source, index, memory)
            folder = root / source / f"task{index}"
            folder.mkdir(parents=True, exist_ok=True)
            names = []
            for k in range(len(spec["screen_texts"])):
                name = f"screen_{k:02d}.png"
                _png(folder / name, tuple(spec["screen_size"]), 31 * index + k + 7 * len(source))
                names.append(name)
            spec["screens"] = names
            (folder / "task.json").write_text(json.dumps(spec, indent=1) + "\n", encoding="utf-8")
            out.append(folder)
    return out


if __name__ == "__main__":
    print(len(build(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/real_formats"))))
