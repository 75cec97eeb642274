"""AgentNet / OpenCUA JSON Lines (one task per line).

Record shape: ``{task_id, instruction, traj: [{index, image, value: {observation, thought, action, code,
last_step_correct, last_step_redundant, reflection}}], task_completed, ...}``.

Timing: ``image`` is the screen *before* the step's action (``x_t``), so ``x_{t+1}`` of step ``t`` is
the next step's image. The screen after the last action is not stored: the last step's
``screenshot_after`` is None (it is never needed: ``e_T`` is no decision's history).

Actions: ``code`` is PyAutoGUI with *relative* ``[0, 1]`` coordinates, parsed by the one action parser
(:func:`causalcache_memory.actions.parse.read_action`, the runtime's) with ``coords="relative"``
(recorded as ``metadata.coords``). It reads AgentNet's forms itself: ``hotkey([...])`` with a list,
``computer.triple_click(x=, y=)`` / ``pyautogui.tripleClick`` (a ``click`` with ``amount = 3``, never
equivalent to a single click), ``computer.wait()``, ``computer.terminate(status=..)`` and two-line
``moveTo`` + ``dragTo``. Code that does not parse is kept as an unparsed step.

Other fields: ``value.action`` (the low-level action text) is the step's ``instruction``; the response
``r_t`` is the demonstration rendered as ``Observation / Reflection / Thought / Action / Code`` sections
(the empty ones left out): the observation and reflection texts are kept as event text, shown when the
event is restored at high fidelity, and never enter the one-line summary (written from the action and
the instruction only). Success is
``task_completed`` (never the terminate status). Step ids are the ``index`` values. AgentNet has no app
labels (``app`` is None).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from causalcache_lab.data.loaders._common import (
    LoadReport,
    LoadResult,
    ScreenStore,
    StepDraft,
    assemble,
    format_error,
    json_objects,
    load_result,
    parse_drafts,
    screen_size_of,
)
from causalcache_lab.data.trajectory import Trajectory

__all__ = ["RESPONSE_SECTIONS", "load_agentnet", "render_response"]


#: the ``value`` texts rendered into the response, in order, with their section titles
RESPONSE_SECTIONS = (
    ("Observation", "observation"),
    ("Reflection", "reflection"),
    ("Thought", "thought"),
    ("Action", "action"),
)


def render_response(value: dict[str, Any]) -> str:
    """The demonstration as one response: ``## Observation / ## Reflection / ## Thought / ## Action /
    ## Code`` sections (those present and non-empty), OpenCUA's reasoning order."""
    parts = []
    for title, key in RESPONSE_SECTIONS:
        text = value.get(key)
        if isinstance(text, str) and text.strip():
            parts.append(f"## {title}:\n{text.strip()}")
    code = value.get("code")
    if isinstance(code, str) and code.strip():
        parts.append(f"## Code:\n```python\n{code.strip()}\n```")
    return "\n\n".join(parts)


def _files(src: Path) -> list[Path]:
    if src.is_dir():
        files = sorted(p for p in src.rglob("*.jsonl") if p.is_file())
        if not files:
            raise format_error(src, None, "*.jsonl", "no AgentNet JSONL file in this directory")
        return files
    return [src]


def _image_dirs(src: Path, images: str | Path | None) -> list[Path]:
    if images is not None:
        return [Path(images)]
    base = src if src.is_dir() else src.parent
    return [base / "images", base]


def _find_image(name: str, dirs: list[Path]) -> Path | None:
    for d in dirs:
        path = d / name
        if path.is_file():
            return path
    return None


def load_agentnet(
    src: str | Path, archive: Any, *, images: str | Path | None = None, platform: str = "desktop"
) -> LoadResult:
    """Load AgentNet JSONL file(s) (``src``: a file or a directory of ``*.jsonl``).

    ``images``: the directory holding the ``image`` files (default: ``images/`` next to the JSONL, then
    the JSONL's own directory).
    """
    src = Path(src)
    store = ScreenStore(archive)
    report = LoadReport("agentnet")
    dirs = _image_dirs(src, images)
    out: list[Trajectory] = []
    for path in _files(src):
        for lineno, record in json_objects(path, "a task record"):
            traj = _trajectory(record, path, lineno, store, report, dirs, platform)
            out.append(traj)
    return load_result(out, report, store)


def _trajectory(
    record: Any,
    path: Path,
    lineno: int,
    store: ScreenStore,
    report: LoadReport,
    dirs: list[Path],
    platform: str,
) -> Trajectory:
    for key in ("task_id", "instruction", "traj"):
        if key not in record:
            raise format_error(path, lineno, key, "missing")
    steps = record["traj"]
    if not isinstance(steps, list):
        raise format_error(path, lineno, "traj", f"must be a list of steps, got {type(steps).__name__}")
    if not isinstance(record["instruction"], str):
        raise format_error(path, lineno, "instruction", "must be a string")
    drafts: list[StepDraft] = []
    seen: set[str] = set()
    for k, step in enumerate(steps):
        where = f"traj[{k}]"
        if not isinstance(step, dict) or not isinstance(step.get("value"), dict):
            raise format_error(path, lineno, f"{where}.value", "each step needs a 'value' object")
        value = step["value"]
        index = step.get("index", k)
        if isinstance(index, bool) or not isinstance(index, (int, str)):
            raise format_error(path, lineno, f"{where}.index", f"must be an integer, got {index!r}")
        step_id = str(index)
        if step_id in seen:
            raise format_error(path, lineno, f"{where}.index", f"duplicate step index {index!r}")
        seen.add(step_id)
        image = step.get("image")
        if not isinstance(image, str) or not image:
            raise format_error(path, lineno, f"{where}.image", "must name the screenshot file")
        image_path = _find_image(image, dirs)
        if image_path is None:
            raise format_error(
                path, lineno, f"{where}.image", f"{image!r} not found in {', '.join(map(str, dirs))}"
            )
        code = value.get("code")
        if not isinstance(code, str):
            raise format_error(path, lineno, f"{where}.value.code", f"must be a string, got {code!r}")
        meta: dict[str, Any] = {}
        for flag in ("last_step_correct", "last_step_redundant"):
            if flag in value:
                meta[flag] = value[flag]
        drafts.append(
            StepDraft(
                step_id=step_id,
                action=None,
                response=render_response(value),
                screen=store.put_file(image_path),
                instruction=value.get("action") if isinstance(value.get("action"), str) else None,
                metadata=meta,
                raw=code,
                where=f"{path}:{lineno}:{where}",
            )
        )
    completed = record.get("task_completed", False)
    if not isinstance(completed, bool):
        raise format_error(path, lineno, "task_completed", f"must be true or false, got {completed!r}")
    metadata = {
        k: record[k]
        for k in ("alignment_score", "efficiency_score", "task_difficulty", "natural_language_task")
        if k in record and isinstance(record[k], (int, float, str, bool))
    }
    metadata["source"] = str(path)
    size = screen_size_of(store, drafts)
    where = f"{path}:{lineno}: task {record['task_id']!r}"
    system = parse_drafts(
        drafts, report, platform="desktop", screen_size=size, coords="relative", where=where
    )
    metadata["coords"] = system
    return Trajectory(
        trajectory_id=str(record["task_id"]),
        goal=record["instruction"],
        platform=platform,
        screen_size=size,
        steps=assemble(drafts, "before"),
        success=completed,
        metadata=metadata,
    )
