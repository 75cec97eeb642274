"""A thread's decisions as HTML rows, shared by ``causalcache report`` (a recorded thread) and the lab's
closed-loop ``report.html``.

One row per decision ``t``: on the left what the model was told and why (the action, pass 2, the
selector's predicted gain against its threshold or why it declined, which events entered or left the
pixel set since the previous decision, and the summary-only history collapsed to one line with the
summaries behind a toggle); on the right one card per event shown **with pixels** (blue = recent,
orange = promoted distant event: the card colours of the paper's figures), then the current screen.
Each card shows the screen text the selector read for that screenshot (the archive's stored text,
normalized as the selector reads it), and a promoted card says why it was restored: its predicted gain
(``promoted_gain`` of the decision record) and the words of its text that the goal or the current
screen also hold. Events that kept their pixels from the previous decision are marked ``kept``; new ones
``new``.

Screenshots: each distinct blob is embedded once as a JPEG thumbnail (one CSS class per blob) and, with
``full=True``, once at full resolution (its stored bytes) in a JSON block that a small script shows in a
lightbox when a thumbnail is clicked (:mod:`causalcache_memory.report_assets`), so a page stays one
self-contained file. A missing archive or unreadable blob shows a placeholder; every text is
HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from causalcache_memory.report_assets import TIMELINE_CSS, ScreenTexts, Thumbnails, lightbox_html
from causalcache_memory.summarize import action_text

__all__ = [
    "TIMELINE_CSS",
    "ScreenTexts",
    "Thumbnails",
    "esc",
    "legend_html",
    "lightbox_html",
    "step_html",
    "text_matches",
    "thread_steps",
    "timeline_html",
]

_FIDELITIES = ("summary", "recent", "promoted")
_FIDELITY_TEXT = {"summary": "summary only", "recent": "recent", "promoted": "promoted"}
#: facts of a decision record a row shows (the learned selector's, docs/SELECTOR.md)
_RECORD_FACTS = (
    "predicted_gain", "top_gain", "min_gain", "promoted_gain", "fallback", "ood_group", "masked", "selected",
)  # fmt: skip
#: words too common to explain a choice
_STOP = frozenset(
    "the and for with from into onto that this then than your you are was were has have had not all any "
    "can its it's but out off per via one two new old get set use now see".split()
)


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


# ------------------------------------------------------------------ steps from a trace and its log
def thread_steps(trace: Any, log: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per decision record: the events with their fidelity, the current screen, the action and
    the record's facts (:data:`_RECORD_FACTS`); JSON-ready (the lab stores it in ``results.json``)."""
    events = list(trace.events)
    steps: list[dict[str, Any]] = []
    for record in log:
        t = int(record.get("t", 0))
        selected, recent = set(record.get("selected") or ()), set(record.get("recent") or ())
        cards = [
            {
                "index": event.index,
                "fidelity": "summary"
                if event.index not in selected
                else ("recent" if event.index in recent else "promoted"),
                "screenshot": event.screenshot,
                "summary": event.summary,
            }
            for event in events[: max(0, t - 1)]
        ]
        acted = events[t - 1] if 0 < t <= len(events) else None  # the action at t acted on x_t
        size = acted.screen_size if acted is not None else trace.current_screen_size
        step: dict[str, Any] = {
            "t": t,
            "k": record.get("k"),
            "second_pass": bool(record.get("second_pass")),
            "events": cards,
            "current_screenshot": acted.pre_screenshot if acted is not None else trace.current_screenshot,
            "action": action_text(record.get("action"), size) or "(no action)",
            "proposal": action_text(record.get("proposal"), size) if record.get("second_pass") else None,
            "summary_lines": [e.summary for e in events[: max(0, t - 1)]],
            "parse_error": record.get("parse_error"),
            "response": acted.response if acted is not None else None,
        }
        step.update({key: record[key] for key in _RECORD_FACTS if key in record})
        steps.append(step)
    return steps


# ------------------------------------------------------------------ why a step was restored
def _words(text: str | None) -> set[str]:
    from causalcache_memory.selector.screen_text import encode_text

    if not text:
        return set()
    found = set().union(*encode_text(text).line_words) if text.strip() else set()
    return {w for w in found if len(w) >= 3 and w not in _STOP}


def text_matches(
    text: str | None, goal: str | None, current: str | None, *, limit: int = 6
) -> dict[str, list[str]]:
    """Words (3+ letters, common words left out) of a restored screen's ``text`` that the ``goal`` holds,
    and value-shaped tokens (:func:`~causalcache_memory.selector.screen_text.value_tokens`) that the
    goal or the ``current`` screen's text hold: what the selector's text features compare
    (docs/SELECTOR.md); at most ``limit`` of each, sorted."""
    from causalcache_memory.selector.screen_text import value_tokens

    if not text:
        return {"goal": [], "values": []}
    goal_words = _words(goal)
    values = {v.lower() for v in value_tokens(text)}
    elsewhere = {v.lower() for v in value_tokens(f"{goal or ''}\n{current or ''}")}
    return {
        "goal": sorted(_words(text) & goal_words)[:limit],
        "values": sorted(values & elsewhere)[:limit],
    }


def _why_html(
    step: Mapping[str, Any], index: object, text: str | None, current: str | None, goal: str | None
) -> str:
    parts = []
    gains = step.get("promoted_gain")
    gain = gains.get(str(index)) if isinstance(gains, Mapping) else None
    if isinstance(gain, int | float):
        parts.append(f"predicted gain {gain:+.4f} alone")  # swapped in for the oldest recent step
    found = text_matches(text, goal, current)
    if found["goal"]:
        parts.append("goal words: " + ", ".join(found["goal"]))
    if found["values"]:
        parts.append("values also in goal/current screen: " + ", ".join(found["values"]))
    if text is None:
        parts.append("no screen text stored")
    elif not found["goal"] and not found["values"]:
        parts.append("no word shared with the goal or the current screen")
    return f'<p class="why" title="why restored">why: {esc(" · ".join(parts))}</p>'


# ------------------------------------------------------------------ HTML
def card_html(
    event: Mapping[str, Any],
    images: Thumbnails,
    texts: ScreenTexts | None = None,
    *,
    step: Mapping[str, Any] | None = None,
    change: str = "",
    current: str | None = None,
    goal: str | None = None,
) -> str:
    """One event shown with pixels: head, thumbnail, summary, screen text (and why, when promoted)."""
    fidelity = str(event.get("fidelity")) if event.get("fidelity") in _FIDELITIES else "summary"
    index, sha = event.get("index"), event.get("screenshot")
    text = texts.get(sha) if texts is not None else None
    thumb = images.thumb(sha, f"screenshot of event {index}")
    tag = f' <span class="tag {change}">{change}</span>' if change else ""
    why = _why_html(step or {}, index, text, current, goal) if fidelity == "promoted" else ""
    summary = esc(event.get("summary"))
    return (
        f'<div class="card {fidelity}{" " + change if change else ""}" data-fidelity="{fidelity}">'
        f'<div class="ehead">e{esc(index)} · {_FIDELITY_TEXT[fidelity]}{tag}</div>{thumb}'
        f'<p class="sum" title="{summary}">{summary}</p>{why}{_text_box(texts, text)}</div>'
    )


def _text_box(texts: ScreenTexts | None, text: str | None) -> str:
    if texts is None:
        return ""
    if text is None:
        return '<pre class="stext none">(no screen text)</pre>'
    return f'<pre class="stext" title="screen text the selector read">{esc(text)}</pre>'


def _ranges(indices: Sequence[int]) -> str:
    """``[1, 2, 3, 5]`` -> ``e1–e3, e5``."""
    runs: list[list[int]] = []
    for i in sorted(indices):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(f"e{a}" if a == b else f"e{a}–e{b}" for a, b in runs)


def _selector_line(step: Mapping[str, Any]) -> str:
    """What the selector concluded: declined and why, or its gain against its threshold."""
    fallback = step.get("fallback")
    if fallback:
        group = step.get("ood_group")
        far = f", far feature group {group!r}" if group else ""
        return f'<p class="fallback">Recent-B fallback: {esc(fallback)}{esc(far)}</p>'
    if "min_gain" not in step:
        return ""
    best = step.get("top_gain")
    gain = step.get("predicted_gain")
    if step.get("k"):
        said = f"selector: predicted gain {_num(gain)} over Recent-B (threshold {_num(step.get('min_gain'))})"
    else:
        said = f"selector kept Recent-B: best swap {_num(best)} vs threshold {_num(step.get('min_gain'))}"
    masked = step.get("masked")
    return f'<p class="sel">{esc(said)}{esc(f"; read without {masked}" if masked else "")}</p>'


def _num(value: object) -> str:
    return f"{value:+.4f}" if isinstance(value, int | float) and not isinstance(value, bool) else str(value)


def step_html(
    step: Mapping[str, Any],
    images: Thumbnails,
    texts: ScreenTexts | None = None,
    *,
    goal: str | None = None,
    previous: set[int] | None = None,
) -> str:
    """One decision as a row (module doc). ``previous``: the events with pixels at the previous decision
    shown (None: the first row, nothing marked as changed)."""
    t = step.get("t")
    events = [e for e in step.get("events") or [] if isinstance(e, Mapping)]
    shown = [e for e in events if e.get("fidelity") in ("recent", "promoted")]
    summary_only = [int(e["index"]) for e in events if e not in shown and isinstance(e.get("index"), int)]
    now = {int(e["index"]) for e in shown if isinstance(e.get("index"), int)}
    current_sha = step.get("current_screenshot")
    current_text = texts.get(current_sha) if texts is not None else None
    cards = "".join(
        card_html(
            e, images, texts, step=step, current=current_text, goal=goal,
            change="" if previous is None else ("kept" if e.get("index") in previous else "new"),
        )
        for e in shown
    )  # fmt: skip
    current = (
        f'<div class="card current"><div class="ehead">current screen (t={esc(t)})</div>'
        f"{images.thumb(current_sha, f'current screenshot at t={t}')}{_text_box(texts, current_text)}</div>"
    )
    fired = bool(step.get("second_pass"))
    badges = f'<span class="badge">k = {esc(step.get("k"))}</span>' + (
        '<span class="badge fired">pass 2 fired</span>'
        if fired
        else '<span class="badge">no second pass</span>'
    )
    head = [f"<h3>t = {esc(t)}{badges}</h3>", f"<p>Action: <code>{esc(step.get('action'))}</code></p>"]
    if fired and step.get("proposal") is not None:
        head.append(
            f"<p>Pass 2 replaced the first-pass proposal <code>{esc(step.get('proposal'))}</code></p>"
        )
    head.append(_selector_line(step))
    if previous is not None:
        entered, left = sorted(now - previous), sorted(previous - now)
        change = "; ".join(
            x for x in (
                f"pixels for {_ranges(entered)}" if entered else "",
                f"back to summary: {_ranges(left)}" if left else "",
            ) if x
        )  # fmt: skip
        head.append(f'<p class="changed">Since the previous row: {esc(change or "no change")}</p>')
    lines = [str(x) for x in step.get("summary_lines") or []]
    if lines:
        where = _ranges(summary_only) if summary_only else "none"
        head.append(
            f'<details class="hist"><summary>Summary only: {esc(where)} ({len(lines)} summary line(s) in the '
            f"prompt)</summary><pre>{esc(chr(10).join(lines))}</pre></details>"
        )
    if step.get("parse_error"):
        head.append(
            f'<p class="parse-error">Reply not parsed: {esc(step["parse_error"])}</p>'
            f'<pre class="reply">{esc(step.get("response") or "")}</pre>'
        )
    return (
        f'<section class="step"><div class="shead">{"".join(head)}</div>'
        f'<div class="cards">{cards}{current}</div></section>'
    )


def timeline_html(
    steps: Sequence[Mapping[str, Any]],
    images: Thumbnails,
    texts: ScreenTexts | None = None,
    *,
    goal: str | None = None,
) -> str:
    """Every row, each marked against the one shown before it, then the legend's key at the top."""
    rows, previous = [], None
    for step in steps:
        if not isinstance(step, Mapping):
            continue
        rows.append(step_html(step, images, texts, goal=goal, previous=previous))
        previous = {
            int(e["index"])
            for e in step.get("events") or []
            if isinstance(e, Mapping)
            and e.get("fidelity") in ("recent", "promoted")
            and isinstance(e.get("index"), int)
        }
    return legend_html(texts is not None) + "".join(rows)


def legend_html(with_text: bool = False) -> str:
    swatches = (
        ("border:2px solid #1e88e5", "recent event with pixels"),
        ("border:2px solid #fb8c00;background:#fff8e1", "promoted distant event with pixels"),
        ("border:2px solid #212121", "current screen"),
    )
    spans = "".join(f'<span><i class="swatch" style="{s}"></i>{esc(t)}</span>' for s, t in swatches)
    notes = (
        "One row per decision. Events shown only as a summary line are listed on the left (the lines behind "
        "the toggle); <i>new</i> = given pixels at this decision, <i>kept</i> = already shown at the previous "
        "row. Click any screenshot to see it at full resolution (Esc or a click outside closes it)."
    )
    if with_text:
        notes += (
            " Under each screenshot: the screen text the selector read (as it reads it); a promoted card "
            "says why: its predicted gain alone (swapped in for the oldest recent step; the row gives the "
            "whole set's gain, which the threshold is compared with) and the words it shares with the goal "
            "or the current screen."
        )
    return f'<p class="legend">{spans}</p><p class="legend-notes">{notes}</p>'
