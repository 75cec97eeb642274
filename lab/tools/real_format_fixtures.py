"""Build the real-format replay fixtures (lab/tests/fixtures/real_formats) in the public datasets' own layouts.

Four sources, each written in the layout its loader reads (``lab/causalcache_lab/data/loaders/``;
built from the public formats with PIL, no data copied), at the dataset's screen size, with its action
vocabulary and the screen-text format its agents get:

* ``agentnet/``: AgentNet JSONL (``tasks.jsonl`` + ``images/``), 640x360 desktop, PyAutoGUI with relative
  coordinates; text = OCR of the whole desktop (menu bar with a clock, window title, taskbar);
* ``osworld/``: an OSWorld results tree (``pyautogui/a11y_tree/fixture/<domain>/<id>/traj.jsonl``,
  ``result.txt``, ``step_<n>_<ts>.png``) and its ``examples/`` instructions, 1920x1080, PyAutoGUI in
  pixels; text = OSWorld's accessibility-tree table (tab-separated, with position and size);
* ``mobileworld/``: MobileWorld task folders (``<task>/traj.json``, ``screenshots/``, ``result.txt``) and
  ``metadata.json`` (``app_names``, which gives the loader's split), 1080x2400, JSON actions in pixels;
  text = phone OCR with a status bar;
* ``androidcontrol/``: one AndroidControl TFRecord (``episodes.tfrecord``; needs the ``tfrecord`` package),
  1080x2400, JSON actions in pixels; text = uiautomator view-hierarchy XML (also stored as the record's
  ``accessibility_trees``).

Per source, two memory-critical tasks (a value is shown on the screen after step 3 and typed at step 12,
in another app) and one control task (the value typed is on the screen it is typed on). The datasets
carry no screen text the loaders read, so each source has ``screen_text.json`` (``{sha256 of the PNG:
text}``) and ``tasks.json`` (``{trajectory id: {split, value, evidence_sha}}``: the known evidence).

    python lab/tools/real_format_fixtures.py lab/tests/fixtures/real_formats
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, ImageDraw

SIZES = {
    "agentnet": (640, 360),
    "osworld": (1920, 1080),
    "mobileworld": (1080, 2400),
    "androidcontrol": (1080, 2400),
}
_APPS = ("Mail", "Orders", "Notes", "Calendar", "Files", "Chat")
_FILLER = ("Inbox", "Archive", "Settings", "Search", "Recent", "Shared", "Starred", "Help")
_PALETTE = [230, 230, 235, 40, 90, 200, 200, 60, 60, 90, 160, 90] + [0] * (256 * 3 - 12)
T_USE = 12
EVIDENCE_STEP = 3


@dataclass
class Logical:
    """One task, format-free: screens ``S_0 .. S_12`` (``S_k`` after ``k`` actions) and actions 1..12."""

    task_id: str
    goal: str
    split: str
    value: str
    apps: list[str]
    screens: list[tuple[str, list[str]]]  # (app, content lines)
    actions: list[dict]  # relative points; kinds: open_app, click, scroll, back, type


def logical(source: str, index: int, memory: bool) -> Logical:
    value = (
        f"INV-{4100 + 37 * index + len(source)}" if index % 2 == 0 else f"{526300 + 11 * index + len(source)}"
    )
    noun = "invoice number" if value.startswith("INV") else "order number"
    src_app, dst_app = _APPS[index % 3], _APPS[3 + index % 3]
    item = ("Desk Lamp", "Yoga Mat", "Coffee Grinder")[index % 3]
    screens: list[tuple[str, list[str]]] = [
        ("Home", ["Mail", "Orders", "Notes", "Calendar", "Files", "Chat"])
    ]
    for k in range(1, T_USE + 1):
        app = (src_app if k <= 4 else dst_app) if memory else dst_app
        lines = [_FILLER[(k + j) % len(_FILLER)] for j in range(3)]
        if memory and k == EVIDENCE_STEP:
            lines = [item, f"Invoice {value}" if noun == "invoice number" else f"Order {value}", *lines]
        if not memory and k == T_USE - 1:
            lines = [item, f"Reference {value}", *lines]
        if k == T_USE - 1:
            lines = [*lines, f"{noun.capitalize()} field"]
        screens.append((app, lines))
    first = src_app if memory else dst_app
    actions = [
        {"kind": "open_app", "app": first},
        {"kind": "click", "x": 0.3, "y": 0.2},
        {"kind": "click", "x": 0.32, "y": 0.28},
        {"kind": "scroll", "direction": "down"},
        {"kind": "back"},
        {"kind": "open_app", "app": dst_app},
        {"kind": "click", "x": 0.25, "y": 0.18},
        {"kind": "type", "text": "reports"},
        {"kind": "click", "x": 0.3, "y": 0.36},
        {"kind": "scroll", "direction": "down"},
        {"kind": "click", "x": 0.3, "y": 0.6},
        {"kind": "type", "text": value},
    ]
    goal = (
        f"Find the {noun} of the {item} in {src_app}, then enter it in the {noun} field in {dst_app}"
        if memory
        else f"Copy the reference shown in {dst_app} for the {item} into its {noun} field"
    )
    return Logical(
        f"{source}-task{index}",
        goal,
        "memory_critical" if memory else "control",
        value,
        [src_app, dst_app] if memory else [dst_app],
        screens,
        actions,
    )


# ------------------------------------------------------------------ pixels and text
def png(size: tuple[int, int], app: str, lines: list[str]) -> bytes:
    """A flat screen with one bar per text line (palette PNG: a few KB at full size)."""
    w, h = size
    image = Image.new("P", size, 0)
    image.putpalette(_PALETTE)
    draw = ImageDraw.Draw(image)
    row = h // 24
    draw.rectangle([0, 0, w - 1, row - 1], fill=1 + len(app) % 3)
    for i, line in enumerate(lines):
        draw.rectangle(
            [w // 10, row * (3 + i), w // 10 + (len(line) * w) // 60, row * (3 + i) + row // 2],
            fill=1 + (len(line) + i) % 3,
        )
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _boxes(size: tuple[int, int], names: list[str]) -> list[tuple[str, tuple[int, int, int, int]]]:
    w, h = size
    row = h // 24
    return [(n, (w // 10, row * (3 + i), w // 2, row * (4 + i))) for i, n in enumerate(names)]


def text(source: str, size: tuple[int, int], app: str, lines: list[str], k: int) -> str:
    """Screen ``S_k``'s text in the source's format."""
    if source == "agentnet":
        return "\n".join(
            [
                f"{app} File Edit View Window Help Mon 7 Dec 10:{k:02d}",
                f"{app} - Workspace",
                *lines,
                "Start  Browser  Files  Mail",
            ]
        )
    if source == "osworld":
        rows = [
            f"{'heading' if i == 0 else 'label'}\t{n}\t{n}\t\t\t({x0}, {y0})\t({x1 - x0}, {y1 - y0})"
            for i, (n, (x0, y0, x1, y1)) in enumerate(_boxes(size, [app, *lines]))
        ]
        header = "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)"
        return "\n".join([header, f"frame\t{app}\t\tWindow\t\t(0, 0)\t({size[0]}, {size[1]})", *rows])
    if source == "mobileworld":
        return "\n".join([f"10:{k:02d} 5G 85%", app, *lines])
    nodes = "".join(
        f'<node index="{i}" text="{n}" resource-id="com.app:id/v{i}" class="android.widget.TextView" content-desc="" bounds="[{x0},{y0}][{x1},{y1}]"/>'
        for i, (n, (x0, y0, x1, y1)) in enumerate(_boxes(size, [app, *lines]))
    )
    return f'<?xml version="1.0"?><hierarchy rotation="0"><node index="0" text="" bounds="[0,0][{size[0]},{size[1]}]">{nodes}</node></hierarchy>'


# ------------------------------------------------------------------ actions per format
def pyautogui(a: dict, size: tuple[int, int] | None) -> str:
    """PyAutoGUI code: relative coordinates when ``size`` is None (AgentNet), else pixels (OSWorld)."""

    def pt(x: float, y: float) -> str:
        return f"{x}, {y}" if size is None else f"{round(x * size[0])}, {round(y * size[1])}"

    kind = a["kind"]
    if kind == "click":
        return f"pyautogui.click({pt(a['x'], a['y'])})"
    if kind == "type":
        return f"pyautogui.write({a['text']!r})"
    if kind == "scroll":
        return "pyautogui.scroll(-5)"
    if kind == "back":
        return "pyautogui.hotkey('alt', 'tab')"
    return f"pyautogui.click({pt(0.1 + 0.08 * _APPS.index(a['app']), 0.97)})"  # the app's taskbar icon


def mobile_json(a: dict, size: tuple[int, int]) -> dict:
    kind = a["kind"]
    if kind == "click":
        return {"action_type": "click", "x": round(a["x"] * size[0]), "y": round(a["y"] * size[1])}
    if kind == "type":
        return {"action_type": "input_text", "text": a["text"]}
    if kind == "scroll":
        return {"action_type": "scroll", "direction": a["direction"]}
    if kind == "back":
        return {"action_type": "navigate_back"}
    return {"action_type": "open_app", "app_name": a["app"]}


# ------------------------------------------------------------------ writers
def write_source(source: str, root: Path, tasks: list[Logical]) -> None:
    size = SIZES[source]
    folder = root / source
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    texts: dict[str, str] = {}
    known: dict[str, dict] = {}
    records = []
    for task in tasks:
        shots = []
        for k, (app, lines) in enumerate(task.screens):
            data = png(size, app, lines)
            sha = hashlib.sha256(data).hexdigest()
            texts[sha] = text(source, size, app, lines, k)
            shots.append((data, sha))
        traj_id = str(_episode_id(task)) if source == "androidcontrol" else task.task_id  # the loader's id
        known[traj_id] = {
            "split": task.split,
            "value": task.value,
            "evidence_sha": shots[EVIDENCE_STEP][1] if task.split == "memory_critical" else None,
        }
        if source == "agentnet":
            (folder / "images").mkdir(exist_ok=True)
            steps = []
            for k, a in enumerate(task.actions):
                name = f"{task.task_id}_{k:02d}.png"
                (folder / "images" / name).write_bytes(shots[k][0])
                steps.append(
                    {
                        "index": k,
                        "image": name,
                        "value": {
                            "observation": "",
                            "thought": "",
                            "action": a["kind"],
                            "code": pyautogui(a, None),
                        },
                    }
                )
            records.append(
                {"task_id": task.task_id, "instruction": task.goal, "traj": steps, "task_completed": True}
            )
        elif source == "osworld":
            ex = folder / "pyautogui" / "a11y_tree" / "fixture" / "office" / task.task_id
            ex.mkdir(parents=True)
            lines = []
            for k, a in enumerate(task.actions, 1):
                name = f"step_{k}_20261207@1000{k:02d}.png"
                (ex / name).write_bytes(shots[k][0])
                lines.append(
                    json.dumps(
                        {
                            "step_num": k,
                            "action_timestamp": f"20261207@1000{k:02d}",
                            "action": pyautogui(a, size),
                            "response": "",
                            "reward": 0,
                            "done": k == T_USE,
                            "info": {},
                            "screenshot_file": name,
                        }
                    )
                )
            (ex / "traj.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
            (ex / "result.txt").write_text("1.0\n", encoding="utf-8")
            inst = folder / "examples" / "office"
            inst.mkdir(parents=True, exist_ok=True)
            (inst / f"{task.task_id}.json").write_text(
                json.dumps({"id": task.task_id, "instruction": task.goal}) + "\n", encoding="utf-8"
            )
        elif source == "mobileworld":
            tf = folder / task.task_id
            (tf / "screenshots").mkdir(parents=True)
            steps = []
            for k, a in enumerate(task.actions, 1):
                (tf / "screenshots" / f"{task.task_id}-0-{k}.png").write_bytes(shots[k - 1][0])
                steps.append(
                    {"task_goal": task.goal, "step": k, "prediction": "", "action": mobile_json(a, size)}
                )
            (tf / "traj.json").write_text(json.dumps({"0": {"traj": steps}}) + "\n", encoding="utf-8")
            (tf / "result.txt").write_text("score: 1\n", encoding="utf-8")
            records.append((task.task_id, {"app_names": task.apps}))
        else:
            records.append(_example(task, shots, size, [texts[s] for _, s in shots]))
    if source == "agentnet":
        (folder / "tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    if source == "mobileworld":
        (folder / "metadata.json").write_text(json.dumps(dict(records), indent=1) + "\n", encoding="utf-8")
    if source == "androidcontrol":
        from tfrecord.writer import TFRecordWriter

        writer = TFRecordWriter(str(folder / "episodes.tfrecord"))
        for rec in records:
            writer.write(rec)
        writer.close()
    (folder / "screen_text.json").write_text(
        json.dumps(texts, indent=1, sort_keys=True) + "\n", encoding="utf-8"
    )
    (folder / "tasks.json").write_text(json.dumps(known, indent=1, sort_keys=True) + "\n", encoding="utf-8")


def _episode_id(task: Logical) -> int:
    return 5400 + int(task.task_id.rsplit("task", 1)[1])


def _example(task: Logical, shots: list, size: tuple[int, int], trees: list[str]) -> dict:
    """One AndroidControl episode as the ``tfrecord`` writer's ``{key: (values, type)}``."""
    n = len(shots)
    return {
        "episode_id": (_episode_id(task), "int"),
        "goal": (task.goal.encode(), "byte"),
        "screenshots": ([d for d, _ in shots], "byte"),
        "screenshot_widths": ([size[0]] * n, "int"),
        "screenshot_heights": ([size[1]] * n, "int"),
        "accessibility_trees": ([t.encode() for t in trees], "byte"),
        "actions": ([json.dumps(mobile_json(a, size)).encode() for a in task.actions], "byte"),
        "step_instructions": ([a["kind"].encode() for a in task.actions], "byte"),
    }


def build(root: Path) -> None:
    for source in SIZES:
        write_source(
            source, root, [logical(source, i, memory) for i, memory in enumerate((True, True, False))]
        )


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else "lab/tests/fixtures/real_formats"))
