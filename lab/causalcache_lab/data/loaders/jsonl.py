"""The generic trajectory JSON Lines schema: for any other agent's logs (docs/DATA.md, "jsonl").

One trajectory per line::

    {"trajectory_id": "run-17",            # required, unique (the split unit)
     "goal": "Send the order number to Bob", # required, non-empty
     "success": true,                       # required
     "platform": "desktop",                 # desktop | mobile (default desktop)
     "timing": "before",                    # each step's screenshot is the screen before (default) or
                                            # after its action
     "initial_screenshot": "s0.png",        # optional: x_1 when timing = after
     "final_screenshot": "s9.png",          # optional: x_{T+1} when timing = before
     "coords": "auto",                      # auto | relative | absolute | thousand (string actions)
     "metadata": {"split": "memory_critical"},
     "steps": [{"step_id": 3,               # optional, default the position; kept as the dataset id
                "action": "pyautogui.click(x=0.41, y=0.22)",   # PyAutoGUI code, a full response, or
                                            # a JSON action object ({"action": "click", ...} or
                                            # Action.to_dict() output)
                "response": "Thought: ... Action: ...",        # optional, default the action text
                "screenshot": "shots/3.png", # path relative to the JSONL file's folder
                "app": "Chrome",             # optional; never guessed when absent
                "instruction": "click Send"}]}  # optional low-level instruction

Actions are read by the one action parser (the runtime's); the coordinate system (``coords: auto``) is
decided once for the trajectory from all its points and the screen size and recorded as
``metadata.coords``. Actions that do not parse are kept as unparsed steps and counted. A missing ``x_1`` (timing ``after``
without ``initial_screenshot``) or ``x_{T+1}`` (timing ``before`` without ``final_screenshot``) is None.
"""

from __future__ import annotations

import json
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

__all__ = ["load_jsonl"]

_COORDS = ("auto", "relative", "absolute", "thousand")


def load_jsonl(src: str | Path, archive: Any) -> LoadResult:
    """Load a generic trajectory JSONL file (or every ``*.jsonl`` in a directory)."""
    src = Path(src)
    files = sorted(src.glob("*.jsonl")) if src.is_dir() else [src]
    if not files:
        raise format_error(src, None, "*.jsonl", "no JSONL file in this directory")
    store = ScreenStore(archive)
    report = LoadReport("jsonl")
    out = []
    seen: set[str] = set()
    for path in files:
        for lineno, rec in json_objects(path):
            traj = _trajectory(rec, path, lineno, store, report)
            if traj.trajectory_id in seen:
                raise format_error(path, lineno, "trajectory_id", f"duplicate id {traj.trajectory_id!r}")
            seen.add(traj.trajectory_id)
            out.append(traj)
    return load_result(out, report, store)


def _image(path: Path, lineno: int, field_name: str, value: Any, store: ScreenStore) -> str:
    if not isinstance(value, str) or not value:
        raise format_error(path, lineno, field_name, "must be a screenshot path")
    file = path.parent / value
    if not file.is_file():
        raise format_error(path, lineno, field_name, f"{value!r} not found next to {path.name}")
    return store.put_file(file)


def _trajectory(
    rec: dict[str, Any], path: Path, lineno: int, store: ScreenStore, report: LoadReport
) -> Trajectory:
    for key in ("trajectory_id", "goal", "success", "steps"):
        if key not in rec:
            raise format_error(path, lineno, key, "missing")
    if not isinstance(rec["goal"], str) or not rec["goal"].strip():
        raise format_error(path, lineno, "goal", "must be a non-empty string")
    if not isinstance(rec["success"], bool):
        raise format_error(path, lineno, "success", f"must be true or false, got {rec['success']!r}")
    if not isinstance(rec["steps"], list):
        raise format_error(path, lineno, "steps", "must be a list")
    timing = rec.get("timing", "before")
    if timing not in ("before", "after"):
        raise format_error(path, lineno, "timing", f"must be 'before' or 'after', got {timing!r}")
    coords = rec.get("coords", "auto")
    if coords not in _COORDS:
        raise format_error(path, lineno, "coords", f"must be one of {', '.join(_COORDS)}, got {coords!r}")
    platform = rec.get("platform", "desktop")
    if platform not in ("desktop", "mobile"):
        raise format_error(path, lineno, "platform", f"must be 'desktop' or 'mobile', got {platform!r}")
    drafts = []
    for k, step in enumerate(rec["steps"]):
        where = f"steps[{k}]"
        if not isinstance(step, dict):
            raise format_error(path, lineno, where, "must be an object")
        if "action" not in step:
            raise format_error(path, lineno, f"{where}.action", "missing")
        screen = _image(path, lineno, f"{where}.screenshot", step.get("screenshot"), store)
        raw = step["action"]
        text = raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False)
        for opt in ("app", "instruction", "response"):
            if step.get(opt) is not None and not isinstance(step[opt], str):
                raise format_error(path, lineno, f"{where}.{opt}", "must be a string")
        drafts.append(
            StepDraft(
                step_id=str(step.get("step_id", k)),
                action=None,
                response=step.get("response") or text,
                screen=screen,
                app=step.get("app"),
                instruction=step.get("instruction"),
                raw=raw,
                where=f"{path}:{lineno}:{where}",
            )
        )
    initial = (
        _image(path, lineno, "initial_screenshot", rec["initial_screenshot"], store)
        if rec.get("initial_screenshot")
        else None
    )
    final = (
        _image(path, lineno, "final_screenshot", rec["final_screenshot"], store)
        if rec.get("final_screenshot")
        else None
    )
    metadata = rec.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise format_error(path, lineno, "metadata", "must be an object")
    size = screen_size_of(store, drafts, initial, final)
    system = parse_drafts(
        drafts,
        report,
        platform="mobile" if platform == "mobile" else "auto",
        screen_size=size,
        coords=coords,
        where=f"{path}:{lineno}: trajectory {rec['trajectory_id']!r}",
    )
    return Trajectory(
        trajectory_id=str(rec["trajectory_id"]),
        goal=rec["goal"],
        platform=platform,
        screen_size=size,
        steps=assemble(drafts, timing, initial_screen=initial, final_screen=final),
        success=rec["success"],
        metadata={**metadata, "coords": system},
    )
