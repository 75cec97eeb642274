"""A decision's timeline as HTML event cards, shared by ``causalcache report`` (a recorded thread) and
the lab's closed-loop ``report.html``.

One card per past event: dashed grey = summary only, blue = recent event with pixels, orange = promoted
distant event (the card colours of the paper's qualitative and overview figures), then the current
screen. Screenshots are embedded as JPEG data URLs, each distinct blob once (one CSS class per blob), so
a page stays one self-contained file. A missing archive or unreadable blob shows a placeholder; every
text is HTML-escaped.
"""

from __future__ import annotations

import base64
import html
import io
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import CausalCacheError

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["TIMELINE_CSS", "Thumbnails", "esc", "legend_html", "step_html"]

_FIDELITIES = ("summary", "recent", "promoted")
_FIDELITY_TEXT = {"summary": "summary only", "recent": "recent, pixels", "promoted": "promoted, pixels"}


class Thumbnails:
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
        found = self._classes[key]
        if found is None:
            why = "no archive" if self.archive is None else "screenshot unavailable"
            return f'<div class="thumb missing" title="{html.escape(key)}">{why}</div>'
        return f'<div class="thumb {found}" role="img" aria-label="{html.escape(label)}"></div>'

    def css(self) -> str:
        return "\n".join(self._rules)


TIMELINE_CSS = """
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


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def card_html(event: Mapping[str, Any], images: Thumbnails) -> str:
    fidelity = str(event.get("fidelity")) if event.get("fidelity") in _FIDELITIES else "summary"
    index = event.get("index")
    thumb = (
        "" if fidelity == "summary" else images.thumb(event.get("screenshot"), f"screenshot of event {index}")
    )
    return (
        f'<div class="card {fidelity}" data-fidelity="{fidelity}">'
        f'<div class="ehead">e{esc(index)} · {_FIDELITY_TEXT[fidelity]}</div>{thumb}'
        f'<p class="sum">{esc(event.get("summary"))}</p></div>'
    )


def step_html(step: Mapping[str, Any], images: Thumbnails) -> str:
    t = step.get("t")
    events = [e for e in step.get("events") or [] if isinstance(e, Mapping)]
    cards = "".join(card_html(e, images) for e in events)
    current = (
        f'<div class="card current"><div class="ehead">current screen (t={esc(t)})</div>'
        f"{images.thumb(step.get('current_screenshot'), f'current screenshot at t={t}')}</div>"
    )
    fired = bool(step.get("second_pass"))
    badges = f'<span class="badge">k = {esc(step.get("k"))}</span>' + (
        '<span class="badge fired">pass 2 fired</span>'
        if fired
        else '<span class="badge">no second pass</span>'
    )
    lines = [str(x) for x in step.get("summary_lines") or []]
    parts = [
        f'<section class="step"><h3>t = {esc(t)}{badges}</h3><div class="cards">{cards}{current}</div>',
        f"<p>Action: <code>{esc(step.get('action'))}</code></p>",
    ]
    if fired and step.get("proposal") is not None:
        parts.append(
            f"<p>Pass 2 replaced the first-pass proposal <code>{esc(step.get('proposal'))}</code></p>"
        )
    if lines:
        text = esc("\n".join(lines))
        parts.append(
            f"<details><summary>Summary text in the prompt: {len(lines)} line(s)</summary><pre>{text}</pre></details>"
        )
    parts.append("</section>")
    return "".join(parts)


def legend_html() -> str:
    swatches = (
        ("border:2px dashed #9e9e9e", "summary only (text)"),
        ("border:2px solid #1e88e5", "recent event with pixels"),
        ("border:2px solid #fb8c00;background:#fff8e1", "promoted distant event with pixels"),
    )
    spans = "".join(f'<span><i class="swatch" style="{s}"></i>{esc(t)}</span>' for s, t in swatches)
    return f'<p class="legend">{spans}</p>'
