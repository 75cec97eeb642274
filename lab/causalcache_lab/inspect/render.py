"""An :class:`~causalcache_lab.inspect.replay.InspectReport` as plain-text tables and as one HTML page.

The page is self-contained (no script, no network): the screens each decision restored from outside
Recent-B are embedded once (a click enlarges one to full resolution, a second click shrinks it), beside the
screen text the selector read for them.
"""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import Any

from causalcache_lab.inspect.replay import InspectReport, TrajectoryReport

__all__ = ["decision_table", "summary_table", "write_html"]


def _table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    line = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *(line(r) for r in rows)])


def _events(events: tuple[int, ...]) -> str:
    return ",".join(str(e) for e in events) or "-"


def decision_table(traj: TrajectoryReport) -> str:
    """One row per decision: step, could-swap, what happened and why, restored events, the action."""
    rows = [
        [str(d.t), "yes" if d.could_swap else "no", d.why, _events(d.restored), _events(d.selected), d.action]
        for d in traj.decisions
    ]
    return _table(["t", "could swap", "decision", "restored", "shown (B events)", "action"], rows)


def summary_table(report: InspectReport) -> str:
    """One row per trajectory and a total row."""
    groups = lambda g: ", ".join(f"{k} {v}" for k, v in sorted(g.items())) or "-"  # noqa: E731
    rows = [
        [t.trajectory_id, t.platform, str(len(t.decisions)), str(t.could_swap), str(t.declined), str(t.swapped),
         groups(t.far_groups)]
        for t in report.trajectories
    ]  # fmt: skip
    rows.append(
        ["total", "", str(report.decisions), str(report.could_swap),
         f"{report.declined} ({report.declined_share:.0%})", str(report.swapped), groups(report.far_groups)]
    )  # fmt: skip
    return _table(
        ["trajectory", "platform", "decisions", "could swap", "declined", "swapped", "far groups"], rows
    )


def _mime(raw: bytes) -> str:
    if raw.startswith(b"\x89PNG"):
        return "image/png"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return "image/jpeg"


_CSS = """
body{font:14px system-ui,sans-serif;margin:20px;max-width:1400px}
table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #ccc;padding:3px 6px;text-align:left;
vertical-align:top}th{background:#f3f3f3}.declined{background:#fff1e6}.swap{background:#e8f6e8}
.shot input{display:none}.shot img{width:160px;cursor:zoom-in;border:1px solid #999}
.shot input:checked+img{width:auto;max-width:none;cursor:zoom-out}
.text{white-space:pre-wrap;font:12px monospace;max-height:8em;overflow:auto;background:#fafafa;margin:2px 0}
"""


def write_html(report: InspectReport, path: str | Path, archive: Any, *, max_images: int = 200) -> Path:
    """Write the report as one self-contained page; at most ``max_images`` restored screens are embedded
    (the rest are named by their sha256)."""
    esc = html.escape
    embedded: dict[str, str] = {}

    def shot(sha: str) -> str:
        if sha not in embedded and len(embedded) < max_images and sha in archive:
            raw = archive.get_bytes(sha)
            embedded[sha] = f"data:{_mime(raw)};base64,{base64.b64encode(raw).decode()}"
        text = archive.get_text(sha) if hasattr(archive, "get_text") else None
        body = (
            f'<label class="shot"><input type="checkbox"><img src="{embedded[sha]}" alt="{sha[:12]}"></label>'
            if sha in embedded
            else f"<code>{sha[:12]}</code>"
        )
        caption = f'<div class="text">{esc(text[:600])}</div>' if text else "<div><i>no screen text</i></div>"
        return f"<div>{body}{caption}</div>"

    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>causalcache inspect</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>causalcache inspect: {esc(report.dataset)}</h1>",
        f"<p>allocator <b>{esc(report.allocator)}</b>, budget B = {report.budget}. A decision <i>could swap</i> "
        "when some past screen lies outside the last B (Recent-B); <i>declined</i>: the allocator fell back "
        "to Recent-B (guard: the decision was far from the selector's training data, in the named feature "
        "group); <i>restored</i>: older screens shown instead of recent ones (event j = step j: its action and "
        "the screen after it). Click a screenshot to enlarge it.</p>",
        f"<pre>{esc(summary_table(report))}</pre>",
    ]
    if report.warnings:
        parts.append("<h2>The memory's warnings</h2><ul>")
        parts += [f"<li><pre>{esc(w)}</pre></li>" for w in report.warnings]
        parts.append("</ul>")
    for traj in report.trajectories:
        parts.append(f"<h2>{esc(traj.trajectory_id)} ({esc(traj.platform)})</h2><p>{esc(traj.goal)}</p>")
        parts.append("<table><tr><th>t</th><th>decision</th><th>action</th><th>restored screens</th></tr>")
        for d in traj.decisions:
            cls = "declined" if d.declined else "swap" if d.swaps else ""
            shots = "".join(shot(traj.screens[e]) for e in d.restored if e < len(traj.screens))
            parts.append(
                f'<tr class="{cls}"><td>{d.t}</td><td>{esc(d.why)}</td><td><code>{esc(d.action)}</code></td>'
                f"<td>{shots or '-'}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</body></html>")
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(parts), encoding="utf-8")
    return out
