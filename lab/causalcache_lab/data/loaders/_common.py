"""Shared machinery of the dataset loaders: errors, screenshot import, the event-model assembly, reports.

Every loader turns one dataset's files into :class:`~causalcache_lab.data.trajectory.Trajectory`
records whose screenshots live in a content-addressed archive (original bytes, de-duplicated by
sha256). Two timing conventions exist in the wild and both are mapped onto the paper's event model
``e_j = (x_j, a_j, x_{j+1})`` here, by :func:`assemble`:

* ``before``: the dataset stores the screen each action was taken on (``x_t`` for step ``t``);
  ``x_{t+1}`` of step ``t`` is the next step's screen, and the last step's post-action screen is the
  dataset's final screen if it has one, else missing (None);
* ``after``: the dataset stores the screen after each action (``x_{t+1}`` for step ``t``); step ``t``'s
  ``x_t`` is the previous step's screen, and the first step's pre-action screen is the dataset's initial
  screen if it has one, else missing (None).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from causalcache_lab.data.trajectory import Step, Trajectory
from causalcache_memory._jsonl import json_lines
from causalcache_memory.actions.coords import CoordSystem, RawAction, build_action, decide_system
from causalcache_memory.actions.model import Action
from causalcache_memory.actions.parse import read_action
from causalcache_memory.errors import ActionParseError, ArchiveError, TraceError

__all__ = [
    "DatasetFormatError",
    "LoadReport",
    "LoadResult",
    "ScreenStore",
    "StepDraft",
    "assemble",
    "check_step_ids",
    "format_error",
    "json_objects",
    "parse_drafts",
]

Timing = Literal["before", "after"]

#: placeholder action of a step whose action could not be parsed (``Step.unparsed`` holds the text)
UNPARSED_PLACEHOLDER = Action(type="wait")


class DatasetFormatError(TraceError):
    """A dataset file does not have the documented shape; the message names file, line and field."""


def format_error(path: str | Path, line: int | None, field_name: str, problem: str) -> DatasetFormatError:
    where = f"{path}:{line}" if line is not None else str(path)
    return DatasetFormatError(f"{where}: field {field_name!r}: {problem}")


def json_objects(path: str | Path, what: str = "a record") -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every non-blank line of a JSONL file (numbers count from 1).

    A line that is not JSON, or is JSON but not an object, raises :class:`DatasetFormatError` naming the
    file and the line (``what`` names the record in the message, e.g. ``"a task record"``).
    """
    for lineno, line in json_lines(path):
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise format_error(path, lineno, "<line>", f"not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise format_error(path, lineno, "<line>", f"{what} must be a JSON object")
        yield lineno, record


def load_result(trajectories: list[Trajectory], report: LoadReport, store: ScreenStore) -> LoadResult:
    """Every loader's ending: each trajectory counted in ``report``, the distinct screens stored, the result."""
    for traj in trajectories:
        report.add(traj)
    report.screens = len(store.sizes)
    return LoadResult(trajectories, report)


@dataclass
class LoadReport:
    """What a loader read.

    Attributes:
        format: the dataset format name.
        trajectories, steps, successes: counts.
        unparsed: steps whose action could not be parsed (kept as unparsed events).
        unparsed_examples: up to 20 raw texts of unparsed actions with the parse error.
        missing_first_screen / missing_last_screen: trajectories without ``x_1`` / ``x_{T+1}``.
        screens: distinct screenshots stored.
        notes: loader-specific remarks (e.g. tasks without an instruction).
    """

    format: str
    trajectories: int = 0
    steps: int = 0
    successes: int = 0
    unparsed: int = 0
    unparsed_examples: list[str] = field(default_factory=list)
    missing_first_screen: int = 0
    missing_last_screen: int = 0
    screens: int = 0
    notes: Counter = field(default_factory=Counter)

    def add(self, traj: Trajectory) -> None:
        self.trajectories += 1
        self.steps += len(traj.steps)
        self.successes += bool(traj.success)
        self.unparsed += sum(not s.parsed for s in traj.steps)
        if traj.steps and traj.steps[0].screenshot_before is None:
            self.missing_first_screen += 1
        if traj.steps and traj.steps[-1].screenshot_after is None:
            self.missing_last_screen += 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": self.format,
            "trajectories": self.trajectories,
            "steps": self.steps,
            "successes": self.successes,
            "unparsed": self.unparsed,
            "unparsed_examples": self.unparsed_examples,
            "missing_first_screen": self.missing_first_screen,
            "missing_last_screen": self.missing_last_screen,
            "screens": self.screens,
            "notes": dict(self.notes),
        }


@dataclass
class LoadResult:
    trajectories: list[Trajectory]
    report: LoadReport


class ScreenStore:
    """Puts screenshot bytes into the archive unchanged and remembers their pixel sizes."""

    def __init__(self, archive: Any) -> None:
        self.archive = archive
        self.sizes: dict[str, tuple[int, int]] = {}

    def put(self, data: bytes, *, where: str) -> str:
        try:
            stored = self.archive.put(bytes(data))
        except (ArchiveError, ValueError) as exc:
            raise DatasetFormatError(f"{where}: screenshot rejected by the archive: {exc}") from exc
        self.sizes[stored.sha256] = stored.size  # read from the header by the archive's check
        return stored.sha256

    def put_file(self, path: Path) -> str:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise DatasetFormatError(f"{path}: cannot read screenshot: {exc}") from exc
        return self.put(data, where=str(path))

    def size(self, sha: str | None) -> tuple[int, int] | None:
        return None if sha is None else self.sizes.get(sha)


@dataclass
class StepDraft:
    """One step as read, before screens are paired: ``screen`` follows the dataset's timing.

    ``raw`` is the action as the dataset stores it (code, a response, or a decoded JSON object) and
    ``where`` names it for reports; :func:`parse_drafts` turns it into ``action`` (or ``unparsed``).
    """

    step_id: str
    action: Action | None
    response: str
    screen: str | None
    unparsed: str | None = None
    app: str | None = None
    instruction: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    raw: Any = None
    where: str = ""


def _raw_text(raw: Any) -> str:
    return raw if isinstance(raw, str) else json.dumps(raw, ensure_ascii=False, default=repr)


def _keep_unparsed(draft: StepDraft, report: LoadReport, exc: Exception) -> None:
    draft.action, draft.unparsed = None, _raw_text(draft.raw)
    if len(report.unparsed_examples) < 20:
        report.unparsed_examples.append(f"{draft.where}: {draft.unparsed[:120]!r}: {exc}")


def parse_drafts(
    drafts: Sequence[StepDraft],
    report: LoadReport,
    *,
    platform: Literal["auto", "desktop", "mobile"],
    screen_size: tuple[int, int] | None,
    coords: str,
    where: str,
) -> CoordSystem | None:
    """Parse every draft's ``raw`` action with the one action parser
    (:func:`causalcache_memory.actions.parse.read_action`, the runtime's), deciding **one** coordinate
    system for the whole trajectory from all its points and ``screen_size``
    (:func:`causalcache_memory.actions.coords.decide_system`); returns it (None: no action has a point).

    An action that does not parse, or whose point lies outside the decided system's range, is kept as
    an unparsed step and counted in ``report``. No system fitting the trajectory at all is a
    :class:`DatasetFormatError` naming ``where`` (the file and trajectory) and the fix.
    """
    read: list[tuple[StepDraft, RawAction]] = []
    for draft in drafts:
        try:
            raw = read_action(draft.raw, platform=platform)
            decide_system([raw], "relative", None)  # every coordinate is a number (else: unparsed)
        except (ActionParseError, ValueError, TypeError) as exc:
            _keep_unparsed(draft, report, exc)
            continue
        read.append((draft, raw))
    try:
        system = decide_system([raw for _, raw in read], coords, screen_size)
    except ActionParseError as exc:
        raise DatasetFormatError(
            f"{where}: field 'coords': no coordinate system fits this trajectory's actions ({exc}); "
            "give it explicitly (data import --coords, or 'coords' in a jsonl record)"
        ) from None
    for draft, raw in read:
        try:
            draft.action = build_action(raw, screen_size=screen_size, coords=system or coords)
        except (ActionParseError, ValueError, TypeError) as exc:
            _keep_unparsed(draft, report, exc)
    return system


def check_step_ids(drafts: Sequence[StepDraft], path: str | Path, where: str) -> None:
    """Refuse a trajectory whose steps repeat an id (each id names one step and one screenshot)."""
    counts = Counter(d.step_id for d in drafts)
    repeated = sorted((i for i, n in counts.items() if n > 1), key=lambda i: (len(i), i))
    if repeated:
        raise format_error(
            path,
            None,
            f"{where}.step",
            f"duplicate step id(s) {', '.join(repr(i) for i in repeated)}: each step needs its own id "
            "(and screenshot); fix the ids in the file",
        )


def assemble(
    drafts: Sequence[StepDraft],
    timing: Timing,
    *,
    initial_screen: str | None = None,
    final_screen: str | None = None,
) -> tuple[Step, ...]:
    """Pair each step with ``x_t`` and ``x_{t+1}`` under the dataset's timing (module docstring)."""
    if not drafts:
        return ()
    screens = [d.screen for d in drafts]
    if timing == "before":
        befores = screens
        afters = [*screens[1:], final_screen]
    elif timing == "after":
        befores = [initial_screen, *screens[:-1]]
        afters = screens
    else:  # pragma: no cover - internal
        raise ValueError(f"timing={timing!r}")
    steps = []
    for d, before, after in zip(drafts, befores, afters, strict=True):
        steps.append(
            Step(
                action=d.action if d.action is not None else UNPARSED_PLACEHOLDER,
                response=d.response,
                screenshot_before=before,
                screenshot_after=after,
                app=d.app,
                instruction=d.instruction,
                metadata=d.metadata,
                step_id=d.step_id,
                unparsed=d.unparsed if d.action is None else None,
            )
        )
    return tuple(steps)


def track_apps(drafts: Sequence[StepDraft]) -> None:
    """Per-step app labels from ``open_app`` actions: the app in the foreground when each action was
    taken. Before the first ``open_app`` and after ``home`` the foreground app is unknown (None)."""
    current: str | None = None
    for d in drafts:
        if d.app is None:
            d.app = current
        if d.action is not None and d.action.type == "open_app":
            current = d.action.text
        elif d.action is not None and d.action.type == "home":
            current = None


def screen_size_of(store: ScreenStore, drafts: Sequence[StepDraft], *extra: str | None) -> tuple[int, int]:
    for sha in (*extra, *(d.screen for d in drafts)):
        size = store.size(sha)
        if size is not None:
            return size
    return (1, 1)
