"""Closed-loop results as a plain-text table (for the CLI) and a single self-contained HTML report.

``write_report`` writes ``report.html``: inline CSS, every image embedded as a base64 data URL (plots as
PNG, screenshots as small JPEG thumbnails, each distinct screenshot embedded once and reused through a
CSS class), so the file can be mailed or attached to CI as one artifact. It shows the run's metadata
and command, the arms x splits table, the CausalCache - Recent-B contrasts in plain words, the plots and
one episode's timeline as event cards: dashed grey = summary only, blue = recent event with pixels,
orange = promoted distant event (the card colours of the paper's qualitative and overview figures).

Missing pieces never crash the report: an absent archive or blob shows a placeholder, absent sections
are left out, missing numbers print as ``n/a``. All text from the results is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import CausalCacheError, MissingDependencyError
from causalcache_memory.lab.eval.plots import SPLIT_LABELS, SPLITS, _budget, arm_label, ordered_arms
from causalcache_memory.lab.eval.report_text import (
    _check,
    _ci,
    _fmt,
    _get,
    _k_profile,
    contrast_sentences,
    format_table,
    split_tables,
)

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["REPORT_FILENAME", "contrast_sentences", "format_table", "split_tables", "write_report"]

REPORT_FILENAME = "report.html"
_FIDELITIES = ("summary", "recent", "promoted")
_FIDELITY_TEXT = {"summary": "summary only", "recent": "recent, pixels", "promoted": "promoted, pixels"}


# ---------------------------------------------------------------- images


class _Images:
    """Screenshot thumbnails as data URLs, one CSS class per distinct blob (embedded once)."""

    def __init__(self, archive: ScreenshotArchive | None, max_width: int) -> None:
        self.archive = archive
        self.max_width = max_width
        self._classes: dict[str, str | None] = {}
        self._rules: list[str] = []

    def _encode(self, sha256: str) -> tuple[str, int, int] | None:
        if self.archive is None or not isinstance(sha256, str):
            return None
        try:
            with self.archive.open_image(sha256) as image:
                rgb = image.convert("RGB")
            rgb.thumbnail((self.max_width, 4 * self.max_width))
            buf = io.BytesIO()
            rgb.save(buf, format="JPEG", quality=80, optimize=True)
        except (CausalCacheError, OSError, ValueError, TypeError, KeyError):
            return None  # missing, corrupt or undecodable blob: the card shows a placeholder
        return base64.b64encode(buf.getvalue()).decode("ascii"), rgb.width, rgb.height

    def thumb(self, sha256: object, label: str) -> str:
        """A ``div`` showing the screenshot, or a placeholder when it cannot be read."""
        key = sha256 if isinstance(sha256, str) else ""
        if key not in self._classes:
            encoded = self._encode(key) if key else None
            if encoded is None:
                self._classes[key] = None
            else:
                cls = f"im{len(self._rules)}"
                data, w, h = encoded
                self._rules.append(
                    f".{cls}{{background-image:url(data:image/jpeg;base64,{data});aspect-ratio:{w}/{h}}}"
                )
                self._classes[key] = cls
        cls = self._classes[key]
        if cls is None:
            why = "no archive" if self.archive is None else "screenshot unavailable"
            return f'<div class="thumb missing" title="{html.escape(key)}">{why}</div>'
        return f'<div class="thumb {cls}" role="img" aria-label="{html.escape(label)}"></div>'

    def css(self) -> str:
        return "\n".join(self._rules)


# ---------------------------------------------------------------- HTML sections

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#212121;max-width:1400px}
h1{font-size:22px}h2{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}h3{font-size:15px;margin:6px 0}
table{border-collapse:collapse;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:left}
th{background:#f5f5f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#f5f5f5;padding:8px;overflow-x:auto;white-space:pre-wrap}
.plots img{max-width:100%;margin:6px 12px 6px 0;border:1px solid #eee}
.step{border:1px solid #e0e0e0;border-radius:6px;padding:8px;margin:10px 0}
.cards{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start}
.card{width:132px;border-radius:5px;padding:4px;font-size:11px;background:#fff}
.card.summary{border:2px dashed #9e9e9e;color:#616161}.card.recent{border:2px solid #1e88e5}
.card.promoted{border:2px solid #fb8c00;background:#fff8e1}.card.current{width:240px;border:2px solid #212121}
.ehead{font-weight:600;margin-bottom:2px}.sum{margin:3px 0 0;word-wrap:break-word}
.thumb{width:100%;background-size:100% 100%;background-repeat:no-repeat}
.thumb.missing{aspect-ratio:3/4;background:#eee;color:#757575;display:flex;align-items:center;justify-content:center;text-align:center}
.badge{display:inline-block;border-radius:8px;padding:0 6px;font-size:12px;background:#eceff1;margin-left:6px}
.badge.fired{background:#ffe0b2}.legend span{margin-right:14px}
.swatch{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}
"""


def _esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _header(results: Mapping[str, Any]) -> str:
    meta = results.get("meta") if isinstance(results.get("meta"), Mapping) else {}
    keys = ("tasks", "budget", "seed", "arms", "platform", "machine", "version", "wall_s")
    rows = []
    for key in keys:
        if key in meta:
            value = meta[key]
            value = ", ".join(map(str, value)) if isinstance(value, list) else value
            rows.append(f"<tr><th>{_esc(key)}</th><td>{_esc(value)}</td></tr>")
    command = f"<p>Command:</p><pre><code>{_esc(meta['command'])}</code></pre>" if meta.get("command") else ""
    return f"<h1>CausalCache closed-loop evaluation</h1><table>{''.join(rows)}</table>{command}"


def _results_table(results: Mapping[str, Any]) -> str:
    budget = _budget(results)
    top = "".join(f'<th colspan="4">{_esc(SPLIT_LABELS[s])}</th>' for s in SPLITS)
    sub = "<th>success [95% CI]</th><th>n</th><th>steps</th><th>wall s</th>" * len(SPLITS)
    head = (
        f'<tr><th rowspan="2">arm</th>{top}<th rowspan="2">k profile</th><th rowspan="2">pass-2 fire rate</th>'
        f'<th rowspan="2">added model ms/step</th></tr><tr>{sub}</tr>'
    )
    body = []
    for arm in ordered_arms(results):
        data = results["arms"][arm]
        cells = [f"<th>{_esc(arm_label(arm, budget))}</th>"]
        for split in SPLITS:
            c = _get(data, split)
            cells.append(
                f'<td class="num">{_esc(_fmt(_get(c, "success")))} {_esc(_ci(_get(c, "ci95")))}</td>'
            )
            n = _get(c, "n")
            cells.append(f'<td class="num">{_esc(n if isinstance(n, int) else "n/a")}</td>')
            cells.append(f'<td class="num">{_esc(_fmt(_get(c, "steps_mean"), 1))}</td>')
            cells.append(f'<td class="num">{_esc(_fmt(_get(c, "wall_s_mean"), 2))}</td>')
        cells.append(f"<td>{_esc(_k_profile(_get(data, 'k_profile')))}</td>")
        cells.append(f'<td class="num">{_esc(_fmt(_get(data, "fire_rate")))}</td>')
        cells.append(f'<td class="num">{_esc(_fmt(_get(data, "added_model_ms_per_step"), 1))}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<h2>Results</h2><table>{head}{''.join(body)}</table>"


def _contrasts(results: Mapping[str, Any]) -> str:
    lines = contrast_sentences(results)
    tables = split_tables(results)
    if not lines and not tables:
        return ""
    items = "".join(f"<li>{_esc(line)}</li>" for line in lines)
    note = "<p>Task-paired bootstrap 95% intervals over tasks (a task's score is its mean over seeds).</p>"
    per_split = f"<h3>Per split, against Recent-B</h3><pre>{_esc(tables)}</pre>" if tables else ""
    return f'<h2>Contrasts</h2><ul class="contrasts">{items}</ul>{note}{per_split}'


def _plots(paths: Sequence[Path]) -> str:
    imgs = []
    for path in paths:
        try:
            data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        except OSError:
            continue
        imgs.append(f'<img alt="{_esc(Path(path).name)}" src="data:image/png;base64,{data}">')
    return f'<h2>Plots</h2><div class="plots">{"".join(imgs)}</div>' if imgs else ""


def _card(event: Mapping[str, Any], images: _Images) -> str:
    fidelity = event.get("fidelity") if event.get("fidelity") in _FIDELITIES else "summary"
    index = event.get("index")
    thumb = (
        "" if fidelity == "summary" else images.thumb(event.get("screenshot"), f"screenshot of event {index}")
    )
    return (
        f'<div class="card {fidelity}" data-fidelity="{fidelity}">'
        f'<div class="ehead">e{_esc(index)} · {_FIDELITY_TEXT[fidelity]}</div>{thumb}'
        f'<p class="sum">{_esc(event.get("summary"))}</p></div>'
    )


def _step(step: Mapping[str, Any], images: _Images) -> str:
    t = step.get("t")
    events = [e for e in step.get("events") or [] if isinstance(e, Mapping)]
    cards = "".join(_card(e, images) for e in events)
    current = (
        f'<div class="card current"><div class="ehead">current screen (t={_esc(t)})</div>'
        f"{images.thumb(step.get('current_screenshot'), f'current screenshot at t={t}')}</div>"
    )
    fired = bool(step.get("second_pass"))
    badges = f'<span class="badge">k = {_esc(step.get("k"))}</span>' + (
        '<span class="badge fired">pass 2 fired</span>'
        if fired
        else '<span class="badge">no second pass</span>'
    )
    lines = [str(x) for x in step.get("summary_lines") or []]
    parts = [
        f'<section class="step"><h3>t = {_esc(t)}{badges}</h3><div class="cards">{cards}{current}</div>',
        f"<p>Action: <code>{_esc(step.get('action'))}</code></p>",
    ]
    if fired and step.get("proposal") is not None:
        parts.append(
            f"<p>Pass 2 replaced the first-pass proposal <code>{_esc(step.get('proposal'))}</code></p>"
        )
    if lines:
        text = _esc("\n".join(lines))
        parts.append(
            f"<details><summary>Summary text in the prompt: {len(lines)} line(s)</summary><pre>{text}</pre></details>"
        )
    parts.append("</section>")
    return "".join(parts)


def _legend() -> str:
    swatches = (
        ("border:2px dashed #9e9e9e", "summary only (text)"),
        ("border:2px solid #1e88e5", "recent event with pixels"),
        ("border:2px solid #fb8c00;background:#fff8e1", "promoted distant event with pixels"),
    )
    spans = "".join(f'<span><i class="swatch" style="{s}"></i>{_esc(t)}</span>' for s, t in swatches)
    return f'<p class="legend">{spans}</p>'


def _showcase(results: Mapping[str, Any], images: _Images) -> str:
    show = results.get("showcase")
    if not isinstance(show, Mapping):
        return ""
    budget = show.get("budget")
    outcome = "success" if show.get("success") else "failure"
    head = (
        f"<h2>Episode timeline</h2><p>Arm <b>{_esc(arm_label(str(show.get('arm')), budget))}</b>, task "
        f"<code>{_esc(show.get('task_id'))}</code> ({_esc(SPLIT_LABELS.get(str(show.get('split')), show.get('split')))}), "
        f"B = {_esc(budget)}, outcome: <b>{outcome}</b></p><p>Goal: <q>{_esc(show.get('goal'))}</q></p>"
    )
    steps = [s for s in show.get("steps") or [] if isinstance(s, Mapping)]
    return head + _legend() + "".join(_step(s, images) for s in steps)


def _make_plots(results: Mapping[str, Any], out_dir: Path) -> tuple[list[Path], str]:
    from causalcache_memory.lab.eval.plots import plot_budget_curve, plot_split_bars

    try:
        made = [
            plot_split_bars(results, out_dir / "split_bars.png"),
            plot_budget_curve(results, out_dir / "budget_curve.png"),
        ]
    except MissingDependencyError as exc:
        return [], f"<h2>Plots</h2><p>Plots not drawn: {_esc(exc)}</p>"
    return [p for p in made if p is not None], ""


def write_report(
    results: Mapping[str, Any],
    out_dir: str | Path,
    archive: ScreenshotArchive | None = None,
    *,
    plots: Sequence[str | Path] | None = None,
    thumb_width: int = 240,
) -> Path:
    """Write ``out_dir/report.html`` from a closed-loop ``results`` dict and return its path.

    Args:
        results: the ``results.json`` dictionary of the closed-loop runner.
        out_dir: directory to write into (created if missing).
        archive: where the showcase's screenshots are read from; None shows placeholders.
        plots: PNG files to embed; None draws the split bars and budget curve into ``out_dir`` when
            matplotlib is installed (a note replaces them when it is not).
        thumb_width: largest thumbnail width in pixels (screenshots are re-encoded as JPEG).
    """
    results = _check(results)
    if isinstance(thumb_width, bool) or not isinstance(thumb_width, int) or thumb_width < 16:
        raise ValueError(f"thumb_width={thumb_width!r} must be an integer >= 16 (pixels)")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if plots is None:
        plot_paths, plot_note = _make_plots(results, out)
    else:
        plot_paths, plot_note = [Path(p) for p in plots], ""
    images = _Images(archive, thumb_width)
    body = "".join(
        [
            _header(results),
            _results_table(results),
            _contrasts(results),
            _plots(plot_paths) or plot_note,
            _showcase(results, images),
        ]
    )
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>CausalCache closed-loop report</title>"
        f"<style>{_CSS}\n{images.css()}</style></head><body>{body}</body></html>\n"
    )
    path = out / REPORT_FILENAME
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
