"""Threads recorded by :class:`~causalcache_memory.integrations.langgraph.CausalCacheMemory` (or any
:class:`~causalcache_memory.controller.MemoryController`): deploy with Recent-B, collect, train on them.

``src`` is a JSON Lines manifest, one finished thread per line::

    {"head": "<state['cc_head']>", "episode_id": "<state['cc_episode']>", "success": true,
     "trajectory_id": "optional id", "metadata": {...}}
    {"trace": <Trace.to_dict()>, "success": false}

``head`` lines are read from ``source_archive`` (the deployment's archive: trace records and screenshots);
``trace`` lines carry the trace itself and read screenshots from ``source_archive`` too. Screenshots are
copied into the output archive unchanged (same sha256). ``success`` is required: a trace does not know
whether its task succeeded.

Timing: an event stores both ``x_j`` (``pre_screenshot``) and ``x_{j+1}`` (``screenshot``), so nothing
is missing except ``x_1`` of a trace recorded without an initial observation (then None). Step ids are
the event indices; ``app``, ``screen_size``, ``response`` and ``instruction`` come from the events.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from causalcache_lab.data.loaders._common import (
    DatasetFormatError,
    LoadReport,
    LoadResult,
    ScreenStore,
    StepDraft,
    assemble,
    format_error,
    json_objects,
    load_result,
    screen_size_of,
)
from causalcache_lab.data.trajectory import Trajectory
from causalcache_memory.errors import ArchiveError, CausalCacheError
from causalcache_memory.trace import Trace

__all__ = ["load_causalcache"]


def load_causalcache(src: str | Path, archive: Any, *, source_archive: Any = None) -> LoadResult:
    """Load recorded threads listed in the JSONL manifest ``src`` (see the module docstring)."""
    from causalcache_memory.archive.factory import open_archive
    from causalcache_memory.trace.store import TraceStore

    src = Path(src)
    if source_archive is None:
        raise format_error(src, None, "source_archive", "give the deployment archive (--source-archive)")
    source = open_archive(source_archive) if isinstance(source_archive, (str, Path)) else source_archive
    traces = TraceStore(source)
    store = ScreenStore(archive)
    report = LoadReport("causalcache")
    out = []
    for lineno, rec in json_objects(src):
        if not isinstance(rec.get("success"), bool):
            raise format_error(src, lineno, "success", "required: true or false")
        if "head" not in rec and not isinstance(rec.get("trace"), dict):
            raise format_error(src, lineno, "head", "give 'head' (a trace chain) or 'trace'")
        try:
            if "head" in rec:
                trace = traces.load_trace(str(rec["head"]), episode_id=rec.get("episode_id"))
            else:
                trace = Trace.from_dict(rec["trace"])
        except DatasetFormatError:
            raise
        except (CausalCacheError, KeyError, TypeError) as exc:
            raise format_error(src, lineno, "head" if "head" in rec else "trace", str(exc)) from exc
        traj = _trajectory(trace, rec, src, lineno, source, store, report)
        out.append(traj)
    return load_result(out, report, store)


def _copy(sha: str | None, source: Any, store: ScreenStore, where: str) -> str | None:
    if sha is None:
        return None
    try:
        data = source.get_bytes(sha)
    except (ArchiveError, KeyError) as exc:
        raise format_error(
            where, None, "screenshot", f"{sha[:12]}… is not in the source archive ({exc})"
        ) from exc
    return store.put(data, where=where)


def _trajectory(
    trace: Trace, rec: dict, src: Path, lineno: int, source: Any, store: ScreenStore, report: LoadReport
) -> Trajectory:
    where = f"{src}:{lineno}"
    events = list(trace.events)
    drafts = []
    for e in events:
        unparsed = bool((e.metadata or {}).get("unparsed"))  # the controller's mark of an unparsable reply
        if unparsed and len(report.unparsed_examples) < 20:
            report.unparsed_examples.append(f"{where}: event {e.index}: {e.response[:120]!r}")
        drafts.append(
            StepDraft(
                step_id=str(e.index),
                action=None if unparsed else e.action,
                response=e.response,
                screen=_copy(e.screenshot, source, store, where),
                unparsed=e.response if unparsed else None,
                app=e.app,
                instruction=(e.metadata or {}).get("instruction"),
            )
        )
    initial = _copy(events[0].pre_screenshot, source, store, where) if events else None
    sizes = [e.screen_size for e in events if e.screen_size]
    metadata = dict(rec.get("metadata") or {})
    metadata["episode_id"] = trace.episode_id
    return Trajectory(
        trajectory_id=str(rec.get("trajectory_id") or trace.episode_id),
        goal=trace.goal,
        platform=trace.platform if trace.platform in ("desktop", "mobile") else "desktop",
        screen_size=tuple(sizes[0]) if sizes else screen_size_of(store, drafts, initial),  # type: ignore[arg-type]
        steps=assemble(drafts, "after", initial_screen=initial),
        success=rec["success"],
        metadata=metadata,
    )
