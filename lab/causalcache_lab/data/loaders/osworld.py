"""OSWorld results folders.

Layout: ``<root>/<action_space>/<observation>/<model>/<domain>/<example_id>/{traj.jsonl, result.txt,
step_<n>_<timestamp>.png}``; ``src`` may be the root, any folder inside it, or one example folder (every
folder holding a ``traj.jsonl`` below ``src`` is one trajectory).

``traj.jsonl`` lines: ``{step_num, action_timestamp, action, response, reward, done, info,
screenshot_file}``; several actions of one model response share a ``step_num``. Lines holding only an
``Error`` are recorded in the trajectory metadata and produce no step.

Timing: each line's screenshot is the screen *after* its action (``x_{t+1}``); the initial screen is not
stored, so the first step's ``screenshot_before`` is None (decision ``t = 1`` is never a training state;
every event still has its post-action image ``v_j``). Step ids: ``step_num`` as written (gaps kept); a
repeated ``step_num`` gets ``#2``, ``#3``, ... on its later actions.

Actions: PyAutoGUI code with *absolute pixels* (converted with the trajectory's screen size;
``metadata.coords = "absolute"``), or the sentinels ``DONE``/``FAIL``/``WAIT``, read by the one action
parser (the runtime's); anything it does not read (e.g. most ``computer_13`` dicts) is kept as an
unparsed step.
``response`` is the verbatim model text. Success: the number in ``result.txt`` is > 0 (a missing
``result.txt`` counts as not successful and is noted). The instruction is read from
``<examples>/<domain>/<example_id>.json`` when ``examples`` (OSWorld's ``evaluation_examples/examples``)
is given; otherwise the goal says that the instruction is not available (noted in the report). Trajectory ids are the ``example_id`` unless the same id
occurs twice under ``src`` (several models or runs), in which case the path relative to ``src`` is used.
OSWorld has no app labels (``app`` is None); ``domain`` is kept in the metadata.
"""

from __future__ import annotations

import json
from collections import Counter
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

__all__ = ["load_osworld"]

_PATH_FIELDS = ("action_space", "observation", "model", "domain")


def _examples(src: Path) -> list[Path]:
    folders = sorted({p.parent for p in src.rglob("traj.jsonl")})
    if not folders:
        raise format_error(src, None, "traj.jsonl", "no OSWorld example folder (with traj.jsonl) below it")
    return folders


def _success(folder: Path, report: LoadReport) -> tuple[bool, float | None]:
    path = folder / "result.txt"
    if not path.is_file():
        report.notes["missing result.txt (counted as failed)"] += 1
        return False, None
    text = path.read_text(encoding="utf-8").strip()
    try:
        score = float(text)
    except ValueError:
        raise format_error(path, 1, "result", f"must be a number, got {text[:40]!r}") from None
    return score > 0, score


def _goal(examples: Path | None, domain: str | None, example_id: str, report: LoadReport) -> str:
    missing = f"(instruction not available: OSWorld task {domain}/{example_id})"
    if examples is None or domain is None:
        report.notes["no instruction (pass examples=evaluation_examples/examples)"] += 1
        return missing
    path = examples / domain / f"{example_id}.json"
    if not path.is_file():
        report.notes["instruction file not found"] += 1
        return missing
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise format_error(path, exc.lineno, "<file>", f"not JSON ({exc.msg})") from None
    goal = data.get("instruction") if isinstance(data, dict) else None
    if not isinstance(goal, str):
        raise format_error(path, None, "instruction", "missing or not a string")
    return goal


def load_osworld(
    src: str | Path, archive: Any, *, examples: str | Path | None = None, platform: str = "desktop"
) -> LoadResult:
    """Load every OSWorld example folder below ``src`` (see the module docstring)."""
    src = Path(src)
    store = ScreenStore(archive)
    report = LoadReport("osworld")
    folders = _examples(src)
    names = Counter(f.name for f in folders)
    out = []
    for folder in folders:
        rel = folder.relative_to(src).parts if folder != src else ()
        labels = dict(zip(_PATH_FIELDS, rel[-5:-1], strict=True)) if len(rel) >= 5 else {}
        if len(rel) >= 2 and "domain" not in labels:
            labels["domain"] = rel[-2]
        example_id = folder.name
        traj_id = example_id if names[example_id] == 1 else "/".join(rel) or example_id
        drafts, errors = _steps(folder, store)
        size = screen_size_of(store, drafts)
        where = str(folder / "traj.jsonl")
        system = parse_drafts(
            drafts, report, platform="desktop", screen_size=size, coords="absolute", where=where
        )
        success, score = _success(folder, report)
        meta: dict[str, Any] = {**labels, "example_id": example_id, "score": score, "coords": system}
        if errors:
            meta["errors"] = errors
        traj = Trajectory(
            trajectory_id=traj_id,
            goal=_goal(Path(examples) if examples else None, labels.get("domain"), example_id, report),
            platform=platform,
            screen_size=size,
            steps=assemble(drafts, "after"),
            success=success,
            metadata=meta,
        )
        out.append(traj)
    return load_result(out, report, store)


def _steps(folder: Path, store: ScreenStore) -> tuple[list[StepDraft], list[str]]:
    path = folder / "traj.jsonl"
    drafts: list[StepDraft] = []
    errors: list[str] = []
    used: Counter[str] = Counter()
    for lineno, rec in json_objects(path):
        if "Error" in rec and "action" not in rec:
            errors.append(str(rec["Error"])[:200])
            continue
        for key in ("step_num", "action", "screenshot_file"):
            if key not in rec:
                raise format_error(path, lineno, key, "missing")
        num = rec["step_num"]
        if isinstance(num, bool) or not isinstance(num, (int, str)):
            raise format_error(path, lineno, "step_num", f"must be an integer, got {num!r}")
        used[str(num)] += 1
        step_id = str(num) if used[str(num)] == 1 else f"{num}#{used[str(num)]}"
        shot = folder / str(rec["screenshot_file"])
        if not shot.is_file():
            raise format_error(path, lineno, "screenshot_file", f"{shot.name!r} not found in {folder}")
        screen = store.put_file(shot)
        raw = rec["action"]
        response = rec.get("response")
        meta = {k: rec[k] for k in ("action_timestamp", "reward", "done") if k in rec}
        drafts.append(
            StepDraft(
                step_id=step_id,
                action=None,
                response=response if isinstance(response, str) and response else str(raw),
                screen=screen,
                metadata=meta,
                raw=raw,
                where=f"{path}:{lineno}",
            )
        )
    return drafts, errors
