"""Recorded LangGraph threads -> :class:`~causalcache_lab.data.trajectory.Trajectory` records.

A team that runs its agent with ``CausalCacheMemory`` already has everything training needs: the
checkpointer holds each thread's latest state (``cc_head``, ``cc_episode``), the archive holds the trace
chain and the screenshots. :func:`threads_to_trajectories` reads the latest checkpoint of every thread,
walks its trace chain and builds one trajectory per thread whose screens are the **deployment archive's
own hashes** (no blob is copied: train with ``archive`` = that archive).

The platform (it sets the equivalence radius of agreement labels and the selector's features) is
``data.threads.platform`` when given; otherwise ``mobile`` when the trace says so or its screens are
portrait (a memory whose ``policy.platform`` is ``auto`` records ``desktop`` in the trace), else
``desktop``.

Success labels come from the user (a trace does not know whether its task succeeded):
:func:`load_success_labels` reads a JSON object ``{"thread id": true, ...}``, a CSV with columns
``thread_id,success`` (``true``/``false``/``1``/``0``), or the word ``all`` (every thread succeeded).
Threads without a label are left out (counted); a label naming a thread the checkpointer does not hold is
an error (a typo would otherwise drop data silently).
"""

from __future__ import annotations

import csv
import json
import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from causalcache_lab.data.loaders._common import StepDraft, assemble
from causalcache_lab.data.trajectory import Trajectory
from causalcache_memory.decisions.counts import shadow_differs
from causalcache_memory.errors import ConfigError
from causalcache_memory.trace import Trace

__all__ = [
    "ThreadReport",
    "latest_states",
    "load_success_labels",
    "open_checkpointer",
    "shadow_disagrees",
    "thread_states",
    "threads_to_trajectories",
]

logger = logging.getLogger("causalcache_lab.learn.threads")

_TRUE = {"true", "1", "yes", "success"}
_FALSE = {"false", "0", "no", "failure"}


def load_success_labels(
    spec: str | Path, *, field: str = "data.threads.success", allow_all: bool = True
) -> dict[str, bool] | None:
    """``{thread_id: success}`` from a JSON/CSV file, or None for ``"all"`` (module doc). ``field`` is the
    setting errors name (``--success`` for ``causalcache compare``, which passes ``allow_all=False``)."""
    if str(spec) == "all" and allow_all:
        return None
    path = Path(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            f"{field}={str(spec)!r} cannot be read ({exc}); give a JSON or CSV file of thread id -> success"
            + (", or 'all'" if allow_all else "")
        ) from exc
    if path.suffix.lower() == ".csv":
        return _csv_labels(path, text, field)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{field}: {path} is not JSON ({exc.msg}); use .csv for CSV") from None
    if not isinstance(data, dict) or not all(isinstance(v, bool) for v in data.values()):
        raise ConfigError(f'{field}: {path} must be a JSON object {{"thread id": true|false, ...}}')
    return {str(k): v for k, v in data.items()}


def _csv_labels(path: Path, text: str, field: str) -> dict[str, bool]:
    reader = csv.DictReader(text.splitlines())
    if not {"thread_id", "success"} <= set(reader.fieldnames or ()):  # checked even with no rows
        raise ConfigError(f"{field}: {path} needs the header 'thread_id,success'")
    out: dict[str, bool] = {}
    for lineno, row in enumerate(reader, 2):
        value = str(row["success"]).strip().lower()
        if value not in _TRUE | _FALSE:
            raise ConfigError(f"{field}: {path}:{lineno}: success={row['success']!r}; use true or false")
        out[str(row["thread_id"]).strip()] = value in _TRUE
    return out


def open_checkpointer(spec: str) -> Any:
    """A LangGraph saver from a SQLite path, ``sqlite:///path`` or a ``postgresql://`` URI.

    The same savers the memory's ``checkpointer`` config builds (:mod:`...integrations.langgraph.savers`).
    """
    from causalcache_memory.config.models import CheckpointConfig
    from causalcache_memory.integrations.langgraph.savers import build_checkpointer

    if spec.startswith(("postgres://", "postgresql://")):
        return build_checkpointer(CheckpointConfig(kind="postgres", uri=spec))
    path = spec.removeprefix("sqlite:///")
    if not Path(path).is_file():
        raise ConfigError(
            f"data.threads.checkpointer={spec!r}: no SQLite file there; give the memory's "
            "checkpointer.path (e.g. .causalcache/checkpoints.sqlite) or a postgresql:// URI"
        )
    return build_checkpointer(CheckpointConfig(kind="sqlite", path=path))


@dataclass
class ThreadReport:
    """What :func:`threads_to_trajectories` read: counts and the threads left out, by reason."""

    threads: int = 0
    converted: int = 0
    successes: int = 0
    unlabelled: list[str] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)
    #: converted threads by the allocators their decision records name (``"random"`` on episodes that
    #: ``allocation.explore`` sent to Random; docs/LEARN.md "Record")
    allocators: Counter[str] = field(default_factory=Counter)

    def to_dict(self) -> dict[str, Any]:
        return {
            "threads": self.threads,
            "converted": self.converted,
            "successes": self.successes,
            "unlabelled": len(self.unlabelled),
            "empty": len(self.empty),
            "allocators": dict(sorted(self.allocators.items())),
        }


def latest_states(saver: Any) -> dict[str, dict[str, Any]]:
    """``{thread_id: channel values}`` of each thread's newest root checkpoint."""
    out: dict[str, dict[str, Any]] = {}
    for tup in saver.list(None):
        conf = tup.config.get("configurable", {})
        tid = str(conf.get("thread_id"))
        if conf.get("checkpoint_ns", "") or tid in out:
            continue  # subgraph namespaces; older checkpoints (list is newest first per thread)
        out[tid] = dict(tup.checkpoint.get("channel_values") or {})
    return out


def thread_states(checkpointer: Any) -> dict[str, dict[str, Any]]:
    """:func:`latest_states` of a saver, or of the spec :func:`open_checkpointer` reads (then closed)."""
    if not isinstance(checkpointer, str):
        return latest_states(checkpointer)
    saver = open_checkpointer(checkpointer)
    try:
        return latest_states(saver)
    finally:
        conn = getattr(saver, "conn", None)
        if conn is not None:
            conn.close()


def threads_to_trajectories(
    checkpointer: Any,
    archive: Any,
    success: Mapping[str, bool] | None,
    *,
    platform: str | None = None,
    source: str = "threads",
    success_field: str = "data.threads.success",
) -> tuple[list[Trajectory], ThreadReport]:
    """One trajectory per recorded thread (see the module doc); ``success=None`` marks all successful.

    ``source`` goes to every trajectory's ``metadata["source"]`` (``synthetic-world`` for threads recorded
    in the synthetic world: the labelling path refuses the simulated policy for any other source).

    ``checkpointer`` is a saver or a spec for :func:`open_checkpointer`; ``archive`` the deployment archive
    (an object or a URL for :func:`~causalcache_memory.archive.open_archive`).
    """
    from causalcache_memory.archive import open_archive
    from causalcache_memory.trace.store import TraceStore

    store = TraceStore(open_archive(archive) if isinstance(archive, (str, Path)) else archive)
    states = thread_states(checkpointer)
    if success is not None:
        unknown = sorted(set(success) - set(states))
        if unknown:
            raise ConfigError(
                f"{success_field} names {len(unknown)} thread(s) the checkpointer does not hold, e.g. "
                f"{unknown[:3]}; fix the ids (the checkpointer has {len(states)} threads)"
            )
    report = ThreadReport(threads=len(states))
    out = []
    for tid in sorted(states):
        state = states[tid]
        if success is not None and tid not in success:
            report.unlabelled.append(tid)
            continue
        head = state.get("cc_head")
        if not head:
            report.empty.append(tid)
            continue
        trace = store.load_trace(str(head), episode_id=state.get("cc_episode"))
        if not trace.events:
            report.empty.append(tid)
            continue
        ok = True if success is None else success[tid]
        log = store.load_log(str(head), episode_id=state.get("cc_episode"))
        used = sorted({str(r["allocator"]) for r in log if r.get("allocator")})
        report.allocators[",".join(used) or "none"] += 1
        traj = _trajectory(tid, trace, ok, platform, source, used)
        if (disagrees := shadow_disagrees(log)) is not None:  # recorded under allocation.compare.shadow
            traj.metadata["shadow_disagrees"] = disagrees
        out.append(traj)
        report.successes += ok
    report.converted = len(out)
    logger.info(
        "threads: %d read, %d converted (%d successful), %d unlabelled, %d empty; by allocator %s",
        report.threads, report.converted, report.successes, len(report.unlabelled), len(report.empty),
        dict(report.allocators),
    )  # fmt: skip
    return out, report


def shadow_disagrees(records: list[dict[str, Any]]) -> bool | None:
    """Whether an episode's decisions ever differed from its shadow's (``allocation.compare.shadow``):
    True at the first record whose ``shadow_selected`` differs from ``selected``; None when a decision
    before that carries no shadow set (recorded without shadow, or its shadow failed); else False."""
    for record in sorted((r for r in records if r.get("allocator")), key=lambda r: r.get("t", 0)):
        shadow = record.get("shadow_selected")
        if shadow is None:
            return None
        if shadow_differs(shadow, record.get("selected") or ()):
            return True
    return False


def _live_prompt_fields(event: Any) -> dict[str, Any]:
    """What the live prompt carried of an event beyond its action and reply: the pixel sizes of the
    screen the action was taken on (``screen_size``, the prompt's ``meta["screen_size"]`` that pixel
    coordinates are parsed with) and of its post-action screenshot, and the one-line summary shown
    (:meth:`~causalcache_memory.lab.data.trajectory.Trajectory.trace_at` reads them back)."""
    out: dict[str, Any] = {"summary": event.summary}
    if event.screen_size:
        out["screen_size"] = list(event.screen_size)
    if event.screenshot_size:
        out["screenshot_size"] = list(event.screenshot_size)
    return out


def _trajectory(
    thread_id: str, trace: Trace, success: bool, platform: str | None, source: str, allocators: list[str]
) -> Trajectory:
    events = list(trace.events)
    drafts = []
    for e in events:
        unparsed = bool((e.metadata or {}).get("unparsed"))
        drafts.append(
            StepDraft(
                step_id=str(e.index),
                action=None if unparsed else e.action,
                response=e.response,
                screen=e.screenshot,
                unparsed=e.response if unparsed else None,
                app=e.app,
                instruction=(e.metadata or {}).get("instruction"),
                metadata=_live_prompt_fields(e),
            )
        )
    sizes = [tuple(e.screen_size) for e in events if e.screen_size]
    kind = platform or trace.platform
    if kind != "mobile":  # a memory configured with platform "auto" records "desktop": read the screen
        kind = "mobile" if sizes and sizes[0][1] > sizes[0][0] else "desktop"
    return Trajectory(
        trajectory_id=thread_id,
        goal=trace.goal,
        platform=kind,
        screen_size=sizes[0] if sizes else (1, 1),  # type: ignore[arg-type]
        steps=assemble(drafts, "after", initial_screen=events[0].pre_screenshot),
        success=success,
        metadata={"episode_id": trace.episode_id, "source": source, "allocators": allocators},
    )
