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
from causalcache_memory.timeline_html import (
    TIMELINE_CSS,
    ScreenTexts,
    Thumbnails,
    esc,
    lightbox_html,
    timeline_html,
)

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["REPORT_FILENAME", "contrast_sentences", "format_table", "split_tables", "write_report"]

REPORT_FILENAME = "report.html"


# ---------------------------------------------------------------- images


# ---------------------------------------------------------------- HTML sections


#: the header's rows: key in ``meta``, label, what the figure means
_HEADER = (
    ("tasks", "tasks", "tasks drawn; every arm runs each task once per policy seed"),
    ("budget", "budget B", "past steps shown with pixels; every other past step is a one-line summary"),
    ("seed", "task seed", "which tasks were drawn (the task generator's seed; not a policy seed)"),
    ("policy_seeds", "policy seeds", "seeds of the policy's sampling; a task's score is its mean over them "
     "(the evaluation protocol uses 0,1,2)"),
    ("arms", "arms", "allocators compared at the same budget"),
    ("platform", "platform", "each world's platform, as its tasks say"),
    ("policy", "policy", "the model that acts (simulated-world-policy: the synthetic world's CPU stand-in "
     "for a VLM)"),
    ("selector", "selector", "the learned selector's scorer (bundled: the one the package ships)"),
    ("screen_text", "screen text", "whether the selector read each screen's text"),
    ("machine", "machine", "where it ran"),
    ("version", "version", "package version"),
    ("wall_s", "wall s", "wall time of the whole run, seconds"),
)  # fmt: skip


def _platform(meta: Mapping[str, Any]) -> Any:
    """``desktop (heldout-00, heldout-01); mobile (heldout-02)`` from the per-world platforms."""
    per_world = meta.get("platforms")
    if not isinstance(per_world, Mapping) or not per_world:
        return meta.get("platform")
    worlds: dict[str, list[str]] = {}
    for world, platform in per_world.items():
        worlds.setdefault(str(platform), []).append(str(world))
    return "; ".join(f"{p} ({', '.join(w)})" for p, w in sorted(worlds.items()))


def _header(results: Mapping[str, Any]) -> str:
    meta = results.get("meta") if isinstance(results.get("meta"), Mapping) else {}
    rows = []
    for key, label, what in _HEADER:
        if key not in meta:
            continue
        value = _platform(meta) if key == "platform" else meta[key]
        value = ", ".join(map(str, value)) if isinstance(value, list) else value
        rows.append(f'<tr><th>{esc(label)}</th><td>{esc(value)}</td><td class="what">{esc(what)}</td></tr>')
    command = f"<p>Command:</p><pre><code>{esc(meta['command'])}</code></pre>" if meta.get("command") else ""
    return f"<h1>CausalCache closed-loop evaluation</h1><table>{''.join(rows)}</table>{command}"


#: what the results table's columns mean
_COLUMNS_NOTE = (
    "success: share of tasks solved (a task's score is its mean over the policy seeds), with a task-"
    "bootstrap 95% interval · n: tasks · steps: mean steps per episode · wall s: mean wall time per "
    "episode · k profile: share of decisions that displaced k recent steps for older ones · pass-2 fire "
    "rate: share of two-pass decisions where pass 2 ran · added model ms/step: pass 2's model time "
    "averaged over every step that planned two passes (pass 2 runs only when the selector displaces a "
    "recent step), i.e. the model time a step costs on top of Recent-B; with the simulated policy these "
    "are CPU milliseconds of the stand-in, not a VLM's"
)


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
    note = f'<p class="legend-notes">{esc(_COLUMNS_NOTE)}</p>'
    return f"<h2>Results</h2><table>{head}{''.join(body)}</table>{note}"


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


def _showcase(results: Mapping[str, Any], images: Thumbnails, texts: ScreenTexts | None) -> str:
    show = results.get("showcase")
    if not isinstance(show, Mapping):
        return ""
    budget = show.get("budget")
    outcome = "success" if show.get("success") else "failure"
    platform = f", platform {esc(show['platform'])}" if show.get("platform") else ""
    head = (
        f"<h2>Episode timeline</h2><p>Arm <b>{esc(arm_label(str(show.get('arm')), budget))}</b>, task "
        f"<code>{esc(show.get('task_id'))}</code> ({esc(SPLIT_LABELS.get(str(show.get('split')), show.get('split')))}"
        f"{platform}), B = {esc(budget)}, outcome: <b>{outcome}</b></p><p>Goal: <q>{esc(show.get('goal'))}</q></p>"
    )
    steps = [s for s in show.get("steps") or [] if isinstance(s, Mapping)]
    goal = show.get("goal")
    return f'<div id="timeline">{head}{timeline_html(steps, images, texts, goal=goal if isinstance(goal, str) else None)}</div>'


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
    texts: Any = None,
) -> Path:
    """Write ``out_dir/report.html`` from a closed-loop ``results`` dict and return its path.

    Args:
        results: the ``results.json`` dictionary of the closed-loop runner.
        out_dir: directory to write into (created if missing).
        archive: where the showcase's screenshots are read from; None shows placeholders.
        plots: PNG files to embed; None draws the split bars and budget curve into ``out_dir`` when
            matplotlib is installed (a note replaces them when it is not).
        thumb_width: largest thumbnail width in pixels (screenshots are re-encoded as JPEG; each is also
            embedded once at full resolution, shown on a click).
        texts: where the screen text under each screenshot is read (``get_text(sha)``); None: the world's
            exact OCR of the archive (:class:`~causalcache_lab.selector.world_text.WorldScreenText`) when
            the run's selector read screen text (``meta.screen_text``), else no text is shown.
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
    meta = results.get("meta") if isinstance(results.get("meta"), Mapping) else {}
    if texts is None and archive is not None and meta.get("screen_text") is True:
        from causalcache_lab.selector.world_text import WorldScreenText

        texts = WorldScreenText(archive)
    body = "".join(
        [
            _header(results),
            _results_table(results),
            _contrasts(results),
            _plots(plot_paths) or plot_note,
            _showcase(results, images, ScreenTexts(texts) if texts is not None else None),
        ]
    )
    page = (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        "<title>CausalCache closed-loop report</title>"
        f"<style>{TIMELINE_CSS}\n{images.css()}</style></head><body>{body}{lightbox_html(images)}</body></html>\n"
    )
    path = out / REPORT_FILENAME
    tmp = path.with_suffix(".html.tmp")
    tmp.write_text(page, encoding="utf-8")
    tmp.replace(path)
    return path
