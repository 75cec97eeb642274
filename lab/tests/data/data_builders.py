"""Builders of small datasets in the upstream formats (AgentNet, OSWorld, MobileWorld, AndroidControl,
generic JSONL); every screenshot is a distinct PNG whose top-left pixel encodes its number."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

from PIL import Image


def png(index: int, size: tuple[int, int] = (200, 100)) -> bytes:
    image = Image.new("RGB", size, ((37 * index) % 256, (91 * index) % 256, 120))
    image.putpixel((0, 0), (index % 256, index // 256, 7))
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def screen_number(archive: Any, sha: str) -> int:
    """Inverse of :func:`png` for a screenshot stored in ``archive``."""
    with Image.open(io.BytesIO(archive.get_bytes(sha))) as img:
        r, g, _ = img.convert("RGB").getpixel((0, 0))
    return r + 256 * g


# ------------------------------------------------------------------------------------------- AgentNet
def agentnet_step(index: int, code: str, image: str, *, action: str = "", thought: str = "") -> dict:
    return {
        "index": index,
        "image": image,
        "value": {
            "observation": "a desktop",
            "thought": thought or f"step {index}",
            "action": action or f"do step {index}",
            "code": code,
            "last_step_correct": True,
            "last_step_redundant": False,
            "reflection": "",
        },
    }


def write_agentnet(root: Path, tasks: list[dict], *, first_image: int = 0) -> Path:
    """``tasks``: ``{task_id, instruction, codes: [...], task_completed, indices?}``; writes
    ``root/tasks.jsonl`` and ``root/images/<task>_<k>.png`` (image number = first_image + running k)."""
    (root / "images").mkdir(parents=True, exist_ok=True)
    n = first_image
    lines = []
    for task in tasks:
        steps = []
        indices = task.get("indices") or list(range(len(task["codes"])))
        for index, code in zip(indices, task["codes"], strict=True):
            name = f"{task['task_id']}_{index}.png"
            (root / "images" / name).write_bytes(png(n, task.get("size", (200, 100))))
            n += 1
            steps.append(agentnet_step(index, code, name))
        lines.append(
            {
                "task_id": task["task_id"],
                "instruction": task["instruction"],
                "traj": steps,
                "task_completed": task["task_completed"],
                "alignment_score": 8,
            }
        )
    path = root / "tasks.jsonl"
    path.write_text("".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines), encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------- OSWorld
def write_osworld_example(
    root: Path,
    domain: str,
    example_id: str,
    steps: list[tuple[Any, Any]],
    *,
    result: str | None = "1.0",
    model: str = "gpt-x",
    first_image: int = 100,
    extra_lines: list[dict] | None = None,
    size: tuple[int, int] = (640, 360),
) -> Path:
    """``steps``: ``(step_num, action)``; screenshots are post-action, numbered from ``first_image``."""
    folder = root / "pyautogui" / "screenshot" / model / domain / example_id
    folder.mkdir(parents=True, exist_ok=True)
    lines = []
    for k, (num, action) in enumerate(steps):
        stamp = f"20240101@1200{k:02d}"
        name = f"step_{num}_{stamp}.png"
        (folder / name).write_bytes(png(first_image + k, size))
        lines.append(
            {
                "step_num": num,
                "action_timestamp": stamp,
                "action": action,
                "response": f"Thought: step {num}. ```python\n{action}\n```",
                "reward": 0,
                "done": False,
                "info": {},
                "screenshot_file": name,
            }
        )
    lines.extend(extra_lines or [])
    (folder / "traj.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    if result is not None:
        (folder / "result.txt").write_text(result + "\n", encoding="utf-8")
    return folder


# ------------------------------------------------------------------------------------------- MobileWorld
def write_mobileworld_task(
    root: Path,
    task: str,
    actions: list[dict],
    *,
    goal: str = "Send the code to Bob",
    score: str | None = "score: 1.0",
    steps: list[int] | None = None,
    first_image: int = 300,
    size: tuple[int, int] = (270, 600),
) -> Path:
    folder = root / task
    (folder / "screenshots").mkdir(parents=True, exist_ok=True)
    records = []
    for k, action in enumerate(actions):
        step = steps[k] if steps else k + 1
        (folder / "screenshots" / f"{task}-0-{step}.png").write_bytes(png(first_image + k, size))
        records.append(
            {
                "task_goal": goal,
                "step": step,
                "prediction": f"Thought: step {step}\nAction: {json.dumps(action)}",
                "action": action,
            }
        )
    (folder / "traj.json").write_text(json.dumps({"0": {"tools": [], "traj": records}}), encoding="utf-8")
    if score is not None:
        (folder / "result.txt").write_text(score + "\n", encoding="utf-8")
    return folder


# ------------------------------------------------------------------------------------------- AndroidControl
def write_androidcontrol(path: Path, episodes: list[dict], *, compress: bool = True) -> Path:
    """``episodes``: ``{episode_id, goal, actions: [dict|str], instructions, screens: n}`` as TFRecord."""
    from tfrecord import example_pb2
    from tfrecord.writer import TFRecordWriter

    buf = io.BytesIO()
    for ep in episodes:
        ex = example_pb2.Example()
        f = ex.features.feature
        f["episode_id"].int64_list.value.append(ep["episode_id"])
        f["goal"].bytes_list.value.append(ep["goal"].encode())
        n_screens = ep.get("screens", len(ep["actions"]) + 1)
        for k in range(n_screens):
            f["screenshots"].bytes_list.value.append(png(500 + 10 * ep["episode_id"] + k, (108, 240)))
            f["screenshot_widths"].int64_list.value.append(108)
            f["screenshot_heights"].int64_list.value.append(240)
            f["accessibility_trees"].bytes_list.value.append(b"")
        for action in ep["actions"]:
            text = action if isinstance(action, str) else json.dumps(action)
            f["actions"].bytes_list.value.append(text.encode())
        for text in ep.get("instructions", []):
            f["step_instructions"].bytes_list.value.append(text.encode())
        data = ex.SerializeToString()
        length = len(data).to_bytes(8, "little")
        buf.write(length + TFRecordWriter.masked_crc(length) + data + TFRecordWriter.masked_crc(data))
    raw = buf.getvalue()
    path.write_bytes(gzip.compress(raw) if compress else raw)
    return path
