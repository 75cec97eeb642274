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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from causalcache_lab.eval.plots import SPLIT_LABELS, SPLITS, _budget, arm_label, ordered_arms
from causalcache_lab.eval.report_text import (
    _check,
    _ci,
    _fmt,
    _get,
    _k_profile,
    contrast_sentences,
    format_table,
    split_tables,
)
from causalcache_memory.errors import MissingDependencyError
from causalcache_memory.timeline_html import TIMELINE_CSS, Thumbnails, esc, legend_html, step_html

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["REPORT_FILENAME", "contrast_sentences", "format_table", "split_tables", "write_report"]

REPORT_FILENAME = "report.html"


# ---------------------------------------------------------------- images


# ---------------------------------------------------------------- HTML sections


def _header(results: Mapping[str, Any]) -> str:
    meta = results.get("meta") if isinstance(results.get("meta"), Mapping) else {}
    keys = ("tasks", "budget", "seed", "arms", "platform", "machine", "version", "wall_s")
    rows = []
    for key in keys:
        if key in meta:
            value = meta[key]
            value = ", ".join(map(str, value)) if isinstance(value, list) else value
            rows.append(f"<tr><th>{esc(key)}</th><td>{esc(value)}</td></tr>")
    command = f"<p>Command:</p><pre><code>{esc(meta['command'])}</code></pre>" if meta.get("command") else ""
    return f"<h1>CausalCache closed-loop evaluation</h1><table>{''.join(rows)}</table>{command}"


def _results_table(results: Mapping[str, Any]) -> str:
    budget = _budget(results)
    top = "".join(f'<th colspan="4">{esc(SPLIT_LABELS[s])}</th>' for s in SPLITS)
    sub = "<th>success [95% CI]</th><th>n</th><th>steps</th><th>wall s</th>" * len(SPLITS)
    head = (
        f'<tr><th rowspan="2">arm</th>{top}<th rowspan="2">k profile</th><th rowspan="2">pass-2 fire rate</th>'
        f'<th rowspan="2">added model ms/step</th></tr><tr>{sub}</tr>'
    )
    body = []
    for arm in ordered_arms(results):
        data = results["arms"][arm]
        cells = [f"<th>{esc(arm_label(arm, budget))}</th>"]
        for split in SPLITS:
            c = _get(data, split)
            cells.append(f'<td class="num">{esc(_fmt(_get(c, "success")))} {esc(_ci(_get(c, "ci95")))}</td>')
            n = _get(c, "n")
            cells.append(f'<td class="num">{esc(n if isinstance(n, int) else "n/a")}</td>')
            cells.append(f'<td class="num">{esc(_fmt(_get(c, "steps_mean"), 1))}</td>')
            cells.append(f'<td class="num">{esc(_fmt(_get(c, "wall_s_mean"), 2))}</td>')
        cells.append(f"<td>{esc(_k_profile(_get(data, 'k_profile')))}</td>")
        cells.append(f'<td class="num">{esc(_fmt(_get(data, "fire_rate")))}</td>')
        cells.append(f'<td class="num">{esc(_fmt(_get(data, "added_model_ms_per_step"), 1))}</td>')
        body.append(f"<tr>{''.join(cells)}</tr>")
    return f"<h2>Results</h2><table>{head}{''.join(body)}</table>"


def _contrasts(results: Mapping[str, Any]) -> str:
    lines = contrast_sentences(results)
    tables = split_tables(results)
    if not lines and not tables:
        return ""
    items = "".join(f"<li>{esc(line)}</li>" for line in lines)
    note = "<p>Task-paired bootstrap 95% intervals over tasks (a task's score is its mean over seeds).</p>"
    per_split = f"<h3>Per split, against Recent-B</h3><pre>{esc(tables)}</pre>" if tables else ""
    return f'<h2>Contrasts</h2><ul class="contrasts">{items}</ul>{note}{per_split}'


def _plots(paths: Sequence[Path]) -> str:
    imgs = []
    for path in paths:
        try:
            data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        except OSError:
            continue
        imgs.append(f'<img alt="{esc(Path(path).name)}" src="data:image/png;base64,{data}">')
    return f'<h2>Plots</h2><div class="plots">{"".join(imgs)}</div>' if imgs else ""


def _showcase(results: Mapping[str, Any], images: Thumbnails) -> str:
    show = results.get("showcase")
    if not isinstance(show, Mapping):
        return ""
    budget = show.get("budget")
    outcome = "success" if show.get("success") else "failure"
    head = (
        f"<h2>Episode timeline</h2><p>Arm <b>{esc(arm_label(str(show.get('arm')), budget))}</b>, task "
        f"<code>{esc(show.get('task_id'))}</code> ({esc(SPLIT_LABELS.get(str(show.get('split')), show.get('split')))}), "
        f"B = {esc(budget)}, outcome: <b>{outcome}</b></p><p>Goal: <q>{esc(show.get('goal'))}</q></p>"
    )
    steps = [s for s in show.get("steps") or [] if isinstance(s, Mapping)]
    return head + legend_html() + "".join(step_html(s, images) for s in steps)


def _make_plots(results: Mapping[str, Any], out_dir: Path) -> tuple[list[Path], str]:
    from causalcache_lab.eval.plots import plot_budget_curve, plot_split_bars

    try:
        made = [
            plot_split_bars(results, out_dir / "split_bars.png"),
            plot_budget_curve(results, out_dir / "budget_curve.png"),
        ]
    except MissingDependencyError as exc:
        return [], f"<h2>Plots</h2><p>Plots not drawn: {esc(exc)}</p>"
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
    images = Thumbnails(archive, thumb_width)
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
        f"<style>{TIMELINE_CSS}\n{images.css()}</style></head><body>{body}</body></html>\n"
    )
    path = out / REPORT_FILENAME
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
