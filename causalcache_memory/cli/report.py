"""``causalcache report``: what an agent's model was shown, step by step, for any recorded thread.

Writes one self-contained HTML file (:mod:`causalcache_memory.timeline_html`): one row per decision
``t`` with the events shown with pixels (blue = recent, orange = promoted distant event; new or kept
since the previous row) and the current screen, each screenshot enlarged to full resolution on a click
(``--thumbs-only``: thumbnails only), the screen text the selector read under each screenshot (when the
archive stores text), why each promoted step was restored (its predicted gain, the words it shares with
the goal or the current screen), the summary-only history collapsed to one line, ``k``, whether pass 2
fired and what it replaced, Recent-B fallbacks (and the far feature group) and parse errors; and the
thread's counts (decisions, swaps, pass-2 calls, fallbacks by reason: :class:`DecisionStats` over the
thread's decision log, the same numbers as ``CausalCacheMemory.stats(graph, config)``), also printed.

Where the thread comes from:

* ``--archive URL --thread ID``: the trace chain retained under the thread in the archive (the longest
  chain when a thread was branched);
* ``--config causalcache.yaml --thread ID``: the head in the LangGraph checkpointer the config names
  (``checkpointer.kind`` sqlite or postgres) and the config's archive (``--archive`` overrides it).
"""

from __future__ import annotations

import argparse
import html
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from causalcache_memory.cli._help import documented_parser
from causalcache_memory.decisions.stats import DecisionStats
from causalcache_memory.timeline_html import thread_steps

__all__ = ["counts_line", "find_thread_head", "register", "thread_steps", "write_thread_report"]


#: the command's line in ``causalcache --help``
_HELP = "HTML timeline of what an agent's model was shown for one recorded thread"


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = documented_parser(subparsers, "report", help=_HELP, doc=__doc__)
    parser.add_argument("--thread", required=True, help="LangGraph thread_id (episode) to report")
    parser.add_argument("--archive", help="archive directory or fsspec URL (overrides the config's)")
    parser.add_argument("--config", help="causalcache YAML: its archive and LangGraph checkpointer")
    parser.add_argument("--out", default="causalcache-report.html", help="HTML file to write")
    parser.add_argument("--last", type=int, default=None, metavar="N", help="show only the last N steps")
    parser.add_argument("--thumb-width", type=int, default=240, help="thumbnail width in pixels")
    parser.add_argument(
        "--thumbs-only",
        action="store_true",
        help="embed thumbnails only, not each screenshot at full resolution (a smaller file)",
    )
    parser.set_defaults(handler=_run)


def _run(args: argparse.Namespace) -> int:
    from causalcache_memory.archive import open_archive
    from causalcache_memory.config import load_config
    from causalcache_memory.errors import ConfigError
    from causalcache_memory.trace.store import TraceStore

    if not args.archive and not args.config:
        raise ConfigError("give --archive URL (the memory's archive) or --config causalcache.yaml")
    config = load_config(args.config) if args.config else None
    url = args.archive if args.archive or config is None else config.archive.url
    archive = open_archive(url)
    store = TraceStore(archive)
    episode = _episode_id(args.thread)
    head = _checkpoint_head(config, args.thread) if config is not None else None
    if head is None:
        head = find_thread_head(archive, store, episode)
    trace = store.load_trace(head, episode_id=episode)
    log = store.load_log(head, episode_id=episode)
    path = write_thread_report(
        trace,
        log,
        archive,
        args.out,
        thread=args.thread,
        last=args.last,
        thumb_width=args.thumb_width,
        full_images=not args.thumbs_only,
    )
    print(f"wrote {path} ({len(trace)} events, {len(log)} decisions of thread {args.thread!r})")
    print(f"thread {args.thread!r}: {counts_line(DecisionStats.from_records(log))}")
    return 0


def counts_line(stats: DecisionStats) -> str:
    """``decisions 12 · swaps (k > 0) 3 · pass 2 3 · Recent-B fallbacks 4 (ood 4)`` for one thread, then
    ``· without screen text 9`` when the selector read no screen text on some decisions, and
    ``· shadow differs on 2 of 11 (1 missing)`` when the thread ran with shadow decisions
    (``allocation.compare.shadow``: the compared selector's set differed from the executed one)."""
    reasons = ", ".join(f"{kind} {n}" for kind, n in sorted(stats.fallbacks.items()))
    shadow = ""
    if stats.shadow or stats.shadow_missing:
        shadow = f" · shadow differs on {stats.shadow_disagreed} of {stats.shadow}"
        shadow += f" ({stats.shadow_missing} missing)" if stats.shadow_missing else ""
    return (
        f"decisions {stats.decisions} · swaps (k > 0) {stats.swaps} · pass 2 {stats.second_passes} · "
        f"Recent-B fallbacks {stats.fallback_total}"
        + (f" ({reasons})" if reasons else "")
        + (f" · without screen text {stats.without_text}" if stats.without_text else "")
        + shadow
        + (
            f" · cache per step: write {stats.cache_write_tokens / stats.metered:.0f}, read "
            f"{stats.cache_read_tokens / stats.metered:.0f} tokens, ${stats.cache_cost / stats.metered:.4f}"
            if stats.metered
            else ""
        )
    )


def cache_cost_html(log: Sequence[Mapping[str, Any]]) -> str:
    """A bar per step of the predicted prompt-cache writes and reads (the records' ``prompt_cost``, summed
    over pass 1 and pass 2); empty when the thread was not metered (docs/PROMPT_COST.md)."""
    rows = []
    for record in log:
        calls = [c for c in record.get("prompt_cost") or () if isinstance(c, Mapping)]
        if calls:
            write = sum(int(c.get("cache_write_tokens") or 0) for c in calls)
            read = sum(int(c.get("cache_read_tokens") or 0) for c in calls)
            cost = sum(float(c.get("cost") or 0.0) for c in calls)
            rows.append((int(record.get("t", 0)), write, read, cost))
    if not rows:
        return ""
    top = max(w + r for _, w, r, _ in rows) or 1
    bars = "".join(
        f'<div class="cc-bar"><span class="cc-t">t={t}</span>'
        f'<span class="cc-w" style="width:{300 * w / top:.0f}px"></span>'
        f'<span class="cc-r" style="width:{300 * r / top:.0f}px"></span>'
        f"<span>write {w} · read {r} · ${c:.4f}</span></div>"
        for t, w, r, c in rows
    )
    style = (
        "<style>.cc-bar{display:flex;gap:4px;align-items:center;font:12px sans-serif}"
        ".cc-t{width:3em}.cc-w{background:#c62828;height:10px}.cc-r{background:#2e7d32;height:10px}</style>"
    )
    return f'{style}<h2>Prompt cache per step (predicted: write red, read green)</h2><div class="cc">{bars}</div>'


def _episode_id(thread: str) -> str:
    from causalcache_memory.integrations.langgraph.context import episode_id_for_thread

    return episode_id_for_thread(thread)


def _checkpoint_head(config: Any, thread: str) -> str | None:
    """``cc_head`` of the thread's latest checkpoint in the config's checkpointer (None if absent)."""
    cfg = config.checkpointer
    if cfg.kind == "memory":
        return None
    if cfg.kind == "sqlite" and not Path(cfg.path).is_file():
        return None
    from causalcache_memory.integrations.langgraph.memory import CausalCacheMemory

    saver = CausalCacheMemory(config=config, warmup=False).checkpointer()
    try:
        tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    finally:
        conn = getattr(saver, "conn", None)
        if conn is not None:
            conn.close()
    values = tup.checkpoint.get("channel_values", {}) if tup is not None else {}
    head = values.get("cc_head")
    return head if isinstance(head, str) else None


def find_thread_head(archive: Any, store: Any, episode: str) -> str:
    """The head of the longest trace chain retained under ``episode`` in ``archive``."""
    from causalcache_memory.errors import TraceError

    references = getattr(archive, "references", None)
    if not callable(references):
        raise TraceError(f"archive {archive!r} cannot list an episode's records; pass --config instead")
    nodes: dict[str, dict[str, Any]] = {}
    for sha in references(episode):
        has = getattr(archive, "has_record", None)
        if callable(has) and not has(sha):
            continue  # a screenshot blob
        try:
            data = json.loads(archive.get_record(sha))
        except Exception:
            continue
        if isinstance(data, dict) and "parent" in data and "log" in data:
            nodes[sha] = data
    if not nodes:
        raise TraceError(
            f"no trace recorded for thread {episode!r} in archive {getattr(archive, 'url', archive)!r}; "
            f"recorded threads: {', '.join(sorted(archive.live_episodes())) or 'none'}"
        )
    parents = {d.get("parent") for d in nodes.values()}
    leaves = [sha for sha in nodes if sha not in parents]

    def depth(sha: str) -> tuple[int, int]:
        chain = store.heads(sha, episode_id=episode)
        return len(store.load_trace(sha, episode_id=episode)), len(chain)

    return max(leaves, key=depth)


def write_thread_report(
    trace: Any,
    log: Sequence[Mapping[str, Any]],
    archive: Any,
    out: str | Path,
    *,
    thread: str,
    last: int | None = None,
    thumb_width: int = 240,
    full_images: bool = True,
) -> Path:
    """Write the thread's timeline to ``out`` (one self-contained HTML file) and return its path.

    ``full_images``: embed each screenshot once at full resolution (click a thumbnail to see it);
    False keeps the file small (thumbnails only). The screen text beside each card is the archive's
    (``get_text``), when it stores text."""
    from causalcache_memory.timeline_html import (
        TIMELINE_CSS,
        ScreenTexts,
        Thumbnails,
        lightbox_html,
        timeline_html,
    )

    if last is not None and last < 1:
        raise ValueError(f"--last={last} must be >= 1")
    steps = thread_steps(trace, log)
    shown = steps[-last:] if last else steps
    images = Thumbnails(archive, thumb_width, full=full_images)
    texts = ScreenTexts(archive) if callable(getattr(archive, "get_text", None)) else None
    esc = html.escape
    stats = DecisionStats.from_records(log)
    parts = [
        f"<h1>CausalCache thread report: {esc(thread)}</h1>",
        f"<p>Goal: <q>{esc(trace.goal)}</q> · platform {esc(trace.platform)} · {len(trace)} events · "
        f"{esc(counts_line(stats))} · unparsed replies {sum(1 for e in trace.events if e.unparsed)}</p>",
        _COUNTS_NOTE,
        cache_cost_html(log),
    ]
    if len(shown) < len(steps):
        parts.append(f"<p>Showing the last {len(shown)} of {len(steps)} decisions.</p>")
    parts.append(timeline_html(shown, images, texts, goal=trace.goal))
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        f"<title>CausalCache report: {esc(thread)}</title>"
        f"<style>{TIMELINE_CSS}\n{images.css()}</style></head>"
        f"<body>{''.join(parts)}{lightbox_html(images)}</body></html>\n"
    )
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


#: what the header's counts mean
_COUNTS_NOTE = (
    '<p class="legend-notes">decisions: model calls of the thread (one per step) · swaps: decisions whose '
    "pixel set displaced a recent step for an older one (k = how many) · pass 2: decisions re-run with the "
    "selector's set · Recent-B fallbacks: decisions where the selector did not decide (its guard declined "
    "the state as unlike its training states, it timed out or failed) and the B most recent steps were "
    "shown · without screen text: decisions where no screen of the history had text for the selector.</p>"
)
