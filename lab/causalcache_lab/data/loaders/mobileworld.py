"""MobileWorld run folders.

Layout: ``<src>/<task>/traj.json``, ``<src>/<task>/screenshots/<task>-<run>-<step>.png`` (also looked up
in ``<src>/screenshots/``) and ``<src>/<task>/result.txt`` holding ``score: x``. ``traj.json`` is
``{"<run>": {"tools": ..., "traj": [{task_goal, step, prediction, action: {action_type, ...}, ...}]}}``;
each run is one trajectory (id ``<task>`` for a single run, else ``<task>#<run>``).

Timing: ``screenshots/<task>-<run>-<step>.png`` is the screen *before* the step's action (``x_t``). The
screen after the last action is not stored: the last step's ``screenshot_after`` is None.

Actions: the ``action`` object through the one action parser (the runtime's). The coordinate system is
decided once per trajectory from all its points and the screen size (``coords="auto"``, the default:
fractions are relative, points that (90 % of them) fit the screenshot are pixels, else the 0-1000 grid;
:mod:`causalcache_memory.actions.coords`) and recorded as ``metadata.coords``; ``coords`` can pin it
(``absolute``, ``thousand``, ``relative``) when a policy's convention is known. Unparsable actions (and
points off the screen) are kept as unparsed steps. ``prediction`` is the verbatim model response. Step
ids are the ``step`` values; a repeated id is refused with the file and the ids (it would name one
screenshot for two steps). Apps: a step's ``app`` is the app opened by the latest
``open_app`` before it (None before the first ``open_app`` and after ``home``: never guessed).

Success: ``score`` in ``result.txt`` > 0. Memory-critical split, mechanically from task metadata only
(``app_names`` from the ``metadata`` file, a mapping ``task -> {app_names: [...]}`` or a list of
``{task_name|name|task|id, app_names}``, or ``app_names`` inside the run record): more than one distinct
app -> ``metadata.split = "memory_critical"`` (cross-app), exactly one -> ``"control"``; no metadata -> no
split (noted).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from causalcache_lab.data.loaders._common import (
    LoadReport,
    LoadResult,
    ScreenStore,
    StepDraft,
    assemble,
    check_step_ids,
    format_error,
    load_result,
    parse_drafts,
    screen_size_of,
    track_apps,
)
from causalcache_lab.data.trajectory import Trajectory

__all__ = ["cross_app_split", "load_mobileworld", "read_task_metadata"]

_SCORE = re.compile(r"score\s*[:=]\s*(-?[0-9.]+(?:e-?[0-9]+)?)", re.IGNORECASE)


def read_task_metadata(path: str | Path) -> dict[str, dict[str, Any]]:
    """Task metadata keyed by task name (see the module docstring for the accepted shapes)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise format_error(
            path, getattr(exc, "lineno", None), "<file>", f"cannot read JSON ({exc})"
        ) from None
    if isinstance(data, dict):
        return {str(k): v for k, v in data.items() if isinstance(v, dict)}
    if isinstance(data, list):
        out = {}
        for k, item in enumerate(data):
            name = next(
                (
                    item.get(f)
                    for f in ("task_name", "name", "task", "id")
                    if isinstance(item, dict) and item.get(f)
                ),
                None,
            )
            if name is None:
                raise format_error(
                    path, None, f"[{k}].task_name", "each entry needs task_name, name, task or id"
                )
            out[str(name)] = item
        return out
    raise format_error(path, None, "<file>", "must be a JSON object or list")


def cross_app_split(app_names: Any) -> str | None:
    """``memory_critical`` for more than one distinct app, ``control`` for one, None when unknown."""
    if not isinstance(app_names, (list, tuple)) or not app_names:
        return None
    return "memory_critical" if len({str(a).strip().lower() for a in app_names}) > 1 else "control"


def _score(folder: Path, report: LoadReport) -> tuple[bool, float | None]:
    path = folder / "result.txt"
    if not path.is_file():
        report.notes["missing result.txt (counted as failed)"] += 1
        return False, None
    text = path.read_text(encoding="utf-8")
    match = _SCORE.search(text)
    if match is None:
        raise format_error(path, 1, "score", f"expected 'score: <number>', got {text.strip()[:40]!r}")
    score = float(match.group(1))
    return score > 0, score


def _screenshot(src: Path, folder: Path, task: str, run: str, step: Any) -> Path | None:
    name = f"{task}-{run}-{step}.png"
    for d in (folder / "screenshots", src / "screenshots", folder):
        if (d / name).is_file():
            return d / name
    return None


def load_mobileworld(
    src: str | Path,
    archive: Any,
    *,
    metadata: str | Path | None = None,
    platform: str = "mobile",
    coords: str = "auto",
) -> LoadResult:
    """Load every ``<task>/traj.json`` below ``src`` (or ``src`` itself when it is one task folder)."""
    src = Path(src)
    tasks_meta = read_task_metadata(metadata) if metadata else {}
    store = ScreenStore(archive)
    report = LoadReport("mobileworld")
    files = [src / "traj.json"] if (src / "traj.json").is_file() else sorted(src.glob("*/traj.json"))
    if not files:
        raise format_error(src, None, "traj.json", "no MobileWorld task folder (<task>/traj.json) here")
    root = src.parent if (src / "traj.json").is_file() else src
    out = []
    for path in files:
        folder = path.parent
        task = folder.name
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise format_error(path, exc.lineno, "<file>", f"not JSON ({exc.msg})") from None
        if not isinstance(data, dict) or not data:
            raise format_error(path, 1, "<runs>", 'must be an object like {"0": {"traj": [...]}}')
        success, score = _score(folder, report)
        for run, record in data.items():
            if not isinstance(record, dict) or not isinstance(record.get("traj"), list):
                raise format_error(path, None, f"{run}.traj", "missing or not a list")
            drafts, goal = _steps(root, folder, task, str(run), record["traj"], path, store)
            check_step_ids(drafts, path, f"{run}.traj[*]")
            size = screen_size_of(store, drafts)
            system = parse_drafts(
                drafts, report, platform="mobile", screen_size=size, coords=coords, where=f"{path}: run {run}"
            )
            track_apps(drafts)
            meta: dict[str, Any] = {"task": task, "run": str(run), "score": score, "coords": system}
            app_names = (tasks_meta.get(task) or {}).get("app_names", record.get("app_names"))
            split = cross_app_split(app_names)
            if split is None:
                report.notes["no app_names metadata (no memory-critical split)"] += 1
            else:
                meta["split"], meta["app_names"] = split, list(app_names)
            if not goal:
                report.notes["no task_goal"] += 1
                goal = f"(instruction not available: MobileWorld task {task})"
            traj = Trajectory(
                trajectory_id=task if len(data) == 1 else f"{task}#{run}",
                goal=goal,
                platform=platform,
                screen_size=size,
                steps=assemble(drafts, "before"),
                success=success,
                metadata=meta,
            )
            out.append(traj)
    return load_result(out, report, store)


def _steps(
    root: Path,
    folder: Path,
    task: str,
    run: str,
    steps: list[Any],
    path: Path,
    store: ScreenStore,
) -> tuple[list[StepDraft], str]:
    drafts: list[StepDraft] = []
    goal = ""
    for k, step in enumerate(steps):
        where = f"{run}.traj[{k}]"
        if not isinstance(step, dict):
            raise format_error(path, None, where, "each step must be an object")
        for key in ("step", "action"):
            if key not in step:
                raise format_error(path, None, f"{where}.{key}", "missing")
        if not goal and isinstance(step.get("task_goal"), str):
            goal = step["task_goal"]
        shot = _screenshot(root, folder, task, run, step["step"])
        if shot is None:
            raise format_error(
                path, None, f"{where}.step", f"screenshot {task}-{run}-{step['step']}.png not found"
            )
        screen = store.put_file(shot)
        raw = step["action"]
        prediction = step.get("prediction")
        drafts.append(
            StepDraft(
                step_id=str(step["step"]),
                action=None,
                response=prediction if isinstance(prediction, str) and prediction else json.dumps(raw),
                screen=screen,
                raw=raw,
                where=f"{path}:{where}",
            )
        )
    return drafts, goal
