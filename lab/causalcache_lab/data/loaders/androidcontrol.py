"""AndroidControl TFRecord episodes (needs the ``androidcontrol`` extra: the ``tfrecord`` reader, no
TensorFlow).

Each record is a ``tf.train.Example`` with ``episode_id`` (int64), ``goal`` (bytes), ``screenshots``
(PNG bytes, one per screen), ``screenshot_widths``/``screenshot_heights``, ``accessibility_trees``,
``actions`` (JSON strings, e.g. ``{"action_type": "click", "x": 540, "y": 1200}`` in pixels) and
``step_instructions``. Coordinates are pixels of the episode's screen (``metadata.coords = "absolute"``), read by the one
action parser. Files may be GZIP-compressed (detected from the first bytes).

Timing: ``screenshots[i]`` is the screen before ``actions[i]`` and there is one more screenshot than
actions, the last being the screen after the final action, so nothing is missing. If an episode stores
exactly as many screenshots as actions, the last step's ``screenshot_after`` is None; fewer is an
error. Step ids are ``0 .. n-1`` (the action index). Apps: from ``open_app`` actions (``app_name``), as
for MobileWorld; unknown before the first one. Episodes are human demonstrations without an outcome
label: ``success`` is True and ``metadata.success_source = "demonstration"``. The response of a step is
its action JSON as stored; ``step_instructions[i]`` is its ``instruction``.
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
    load_result,
    parse_drafts,
    screen_size_of,
    track_apps,
)
from causalcache_lab.data.trajectory import Trajectory
from causalcache_memory.errors import MissingDependencyError

__all__ = ["load_androidcontrol"]


def _reader() -> Any:
    try:
        from tfrecord import example_pb2
        from tfrecord.reader import tfrecord_iterator
    except ImportError as exc:
        raise MissingDependencyError(
            "reading AndroidControl TFRecords needs the 'tfrecord' package: "
            "pip install 'causalcache-memory[androidcontrol]'"
        ) from exc
    return example_pb2, tfrecord_iterator


def _files(src: Path) -> list[Path]:
    if src.is_dir():
        files = sorted(p for p in src.iterdir() if p.is_file() and not p.name.startswith("."))
        if not files:
            raise format_error(src, None, "<files>", "no TFRecord file in this directory")
        return files
    return [src]


def _bytes_list(example: Any, key: str) -> list[bytes]:
    feature = example.features.feature
    return list(feature[key].bytes_list.value) if key in feature else []


def _ints(example: Any, key: str) -> list[int]:
    feature = example.features.feature
    return list(feature[key].int64_list.value) if key in feature else []


def load_androidcontrol(src: str | Path, archive: Any, *, platform: str = "mobile") -> LoadResult:
    """Load AndroidControl episodes from a TFRecord file or a directory of shards."""
    example_pb2, tfrecord_iterator = _reader()
    src = Path(src)
    store = ScreenStore(archive)
    report = LoadReport("androidcontrol")
    out = []
    for path in _files(src):
        with open(path, "rb") as fh:
            gzip = fh.read(2) == b"\x1f\x8b"
        try:
            # the reader yields views of one reused buffer: copy each record before reading the next
            records = [
                bytes(r) for r in tfrecord_iterator(str(path), compression_type="gzip" if gzip else None)
            ]
        except Exception as exc:  # the reader raises bare RuntimeError/struct errors on bad framing
            raise format_error(path, None, "<record>", f"not a TFRecord file ({exc})") from None
        for number, raw in enumerate(records, 1):
            example = example_pb2.Example()
            try:
                example.ParseFromString(raw)
            except Exception as exc:
                raise format_error(path, number, "<example>", f"not a tf.train.Example ({exc})") from None
            traj = _episode(example, path, number, store, report, platform)
            out.append(traj)
    return load_result(out, report, store)


def _episode(
    example: Any, path: Path, number: int, store: ScreenStore, report: LoadReport, platform: str
) -> Trajectory:
    ids = _ints(example, "episode_id")
    if not ids:
        raise format_error(path, number, "episode_id", "missing")
    goals = _bytes_list(example, "goal")
    if not goals:
        raise format_error(path, number, "goal", "missing")
    shots = _bytes_list(example, "screenshots")
    actions = _bytes_list(example, "actions")
    instructions = [b.decode("utf-8", "replace") for b in _bytes_list(example, "step_instructions")]
    if len(shots) < len(actions):
        raise format_error(
            path,
            number,
            "screenshots",
            f"{len(shots)} screenshots for {len(actions)} actions (need n or n+1)",
        )
    screens = [store.put(s, where=f"{path}: record {number} screenshots[{i}]") for i, s in enumerate(shots)]
    drafts: list[StepDraft] = []
    for i, blob in enumerate(actions):
        text = blob.decode("utf-8", "replace")
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = text  # kept as an unparsed step below
        drafts.append(
            StepDraft(
                step_id=str(i),
                action=None,
                response=text,
                screen=screens[i],
                instruction=instructions[i] if i < len(instructions) else None,
                raw=data,
                where=f"{path}: record {number} actions[{i}]",
            )
        )
    final = screens[len(actions)] if len(screens) > len(actions) else None
    size = screen_size_of(store, drafts, final)
    system = parse_drafts(
        drafts,
        report,
        platform="mobile",
        screen_size=size,
        coords="absolute",
        where=f"{path}: record {number}",
    )
    track_apps(drafts)
    return Trajectory(
        trajectory_id=str(ids[0]),
        goal=goals[0].decode("utf-8", "replace"),
        platform=platform,
        screen_size=size,
        steps=assemble(drafts, "before", final_screen=final),
        success=True,
        metadata={"success_source": "demonstration", "source": str(path), "coords": system},
    )
