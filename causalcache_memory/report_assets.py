"""What the HTML reports embed: screenshots (thumbnails, full-resolution images and the lightbox that
shows them), the screen text beside them, and the page's CSS (:mod:`causalcache_memory.timeline_html`
lays out the rows).

* :class:`Thumbnails`: each distinct blob once as a JPEG thumbnail (a CSS class per blob, reused by every
  card that shows it) and, with ``full=True``, once at full resolution: the archive's stored bytes
  (PNG, JPEG, WebP or GIF as stored; anything else re-encoded as PNG) in one JSON block that
  :func:`lightbox_html`'s script reads when a thumbnail is clicked (a JSON block, not ``<img>``
  elements, so the browser decodes a full image only when it is asked for).
* :class:`ScreenTexts`: the screen text the selector read for a screenshot (the source's ``get_text``,
  normalized as :class:`~causalcache_memory.selector.screen_text.ScreenTextCache` normalizes it), clipped
  for display.
"""

from __future__ import annotations

import base64
import html
import io
import json
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import CausalCacheError

if TYPE_CHECKING:
    from causalcache_memory.archive.base import ScreenshotArchive

__all__ = ["TIMELINE_CSS", "ScreenTexts", "Thumbnails", "lightbox_html"]

#: thumbnail height in a card, CSS pixels (the width follows the screenshot's aspect ratio)
THUMB_HEIGHT = 84
#: most characters of one screen's text shown in a card
TEXT_CHARS = 2000
_MIME = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF8", "image/gif"))
_ERRORS = (CausalCacheError, OSError, ValueError, TypeError, KeyError)


def _mime(data: bytes) -> str | None:
    for magic, mime in _MIME:
        if data.startswith(magic):
            return mime
    return "image/webp" if data[:4] == b"RIFF" and data[8:12] == b"WEBP" else None


class Thumbnails:
    """Screenshots as data URLs: a thumbnail per distinct blob (one CSS class) and, with ``full``, the
    full-resolution image once (see the module doc). ``max_width``: the thumbnail's largest width."""

    def __init__(self, archive: ScreenshotArchive | None, max_width: int, *, full: bool = True) -> None:
        self.archive = archive
        self.max_width = max_width
        self.full = full
        self._classes: dict[str, str | None] = {}
        self._rules: list[str] = []
        self._full: dict[str, str] = {}
        #: ``(width, height)`` of each embedded full image, by class
        self.sizes: dict[str, tuple[int, int]] = {}

    def _encode(self, sha256: str) -> tuple[str, int, int, tuple[int, int]] | None:
        if self.archive is None:
            return None
        try:
            with self.archive.open_image(sha256) as image:
                rgb = image.convert("RGB")
            size = rgb.size
            rgb.thumbnail((self.max_width, 4 * self.max_width))
            buf = io.BytesIO()
            rgb.save(buf, format="JPEG", quality=80, optimize=True)
        except _ERRORS:
            return None  # missing, corrupt or undecodable blob: the card shows a placeholder
        return base64.b64encode(buf.getvalue()).decode("ascii"), rgb.width, rgb.height, size

    def _full_url(self, sha256: str) -> str | None:
        assert self.archive is not None
        try:
            data = self.archive.get_bytes(sha256)
            mime = _mime(data)
            if mime is None:  # a format browsers may not show: re-encode losslessly
                with self.archive.open_image(sha256) as image:
                    buf = io.BytesIO()
                    image.save(buf, format="PNG")
                data, mime = buf.getvalue(), "image/png"
        except _ERRORS:
            return None
        return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"

    def thumb(self, sha256: object, label: str) -> str:
        """A ``div`` showing the screenshot (click: full resolution), or a placeholder."""
        key = sha256 if isinstance(sha256, str) else ""
        if key not in self._classes:
            encoded = self._encode(key) if key else None
            if encoded is None:
                self._classes[key] = None
            else:
                cls = f"im{len(self._rules)}"
                data, w, h, size = encoded
                self._rules.append(
                    f".{cls}{{background-image:url(data:image/jpeg;base64,{data});aspect-ratio:{w}/{h}}}"
                )
                self._classes[key] = cls
                url = self._full_url(key) if self.full else None
                if url is not None:
                    self._full[cls] = url
                    self.sizes[cls] = size
        found = self._classes[key]
        if found is None:
            why = "no archive" if self.archive is None else "screenshot unavailable"
            return f'<div class="thumb missing" title="{html.escape(key)}">{why}</div>'
        label = html.escape(label)
        if found not in self._full:
            return f'<div class="thumb {found}" role="img" aria-label="{label}"></div>'
        w, h = self.sizes[found]
        return (
            f'<div class="thumb {found}" role="button" tabindex="0" data-full="{found}" '
            f'aria-label="{label} ({w}x{h})" title="click to enlarge ({w}x{h})"></div>'
        )

    def css(self) -> str:
        return "\n".join(self._rules)

    def full_json(self) -> str:
        """The full-resolution images by class, as the text of a ``<script type="application/json">``."""
        return json.dumps(self._full, separators=(",", ":")).replace("</", "<\\/")


class ScreenTexts:
    """Screen text by screenshot hash from ``source`` (``get_text(sha) -> str | None``), normalized as
    the selector reads it and clipped to :data:`TEXT_CHARS`; None when unknown or unreadable."""

    def __init__(self, source: Any) -> None:
        self.source = source
        self._cache: dict[str, str | None] = {}

    def get(self, sha256: object) -> str | None:
        if not isinstance(sha256, str) or not sha256:
            return None
        if sha256 not in self._cache:
            self._cache[sha256] = self._read(sha256)
        return self._cache[sha256]

    def _read(self, sha256: str) -> str | None:
        from causalcache_memory.selector.screen_normalize import normalize_screen_text

        try:
            text = self.source.get_text(sha256)
        except _ERRORS:
            return None
        if text is None:
            return None
        text = normalize_screen_text(str(text)).strip()
        return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + " …"


_LIGHTBOX_JS = """
(function () {
  var box = document.getElementById("cc-lightbox"), img = document.getElementById("cc-full"),
      cap = document.getElementById("cc-caption"), data = null;
  function open(el) {
    if (data === null) data = JSON.parse(document.getElementById("cc-images").textContent);
    var url = data[el.getAttribute("data-full")];
    if (!url) return;
    img.src = url; cap.textContent = el.getAttribute("aria-label") || "";
    box.classList.remove("actual"); box.hidden = false; box.focus();
  }
  function close() { box.hidden = true; img.removeAttribute("src"); }
  document.addEventListener("click", function (ev) {
    var el = ev.target.closest("[data-full]");
    if (el) { ev.preventDefault(); open(el); return; }
    if (!box.hidden && box.contains(ev.target)) {
      if (ev.target === img) box.classList.toggle("actual"); else close();
    }
  });
  document.addEventListener("keydown", function (ev) {
    if (ev.key === "Escape" && !box.hidden) close();
    var el = ev.target.closest && ev.target.closest("[data-full]");
    if (el && (ev.key === "Enter" || ev.key === " ")) { ev.preventDefault(); open(el); }
  });
})();
"""


def lightbox_html(images: Thumbnails) -> str:
    """The lightbox, the full-resolution images and the script that opens them ("" without any)."""
    if not images.full_json() or images.full_json() == "{}":
        return ""
    return (
        '<div id="cc-lightbox" hidden tabindex="-1" role="dialog" aria-label="screenshot at full resolution">'
        '<img id="cc-full" alt="screenshot at full resolution"><p id="cc-caption"></p>'
        '<p class="hint">Click the image: fit to the window / 1:1 pixels · Esc or a click outside: close</p></div>'
        f'<script id="cc-images" type="application/json">{images.full_json()}</script>'
        f"<script>{_LIGHTBOX_JS}</script>"
    )


TIMELINE_CSS = f"""
body{{font:14px/1.45 system-ui,sans-serif;margin:24px;color:#212121;max-width:1400px}}
h1{{font-size:22px}}h2{{font-size:18px;margin-top:28px;border-bottom:1px solid #ddd}}h3{{font-size:15px;margin:0 0 4px}}
table{{border-collapse:collapse;margin:8px 0}}th,td{{border:1px solid #ddd;padding:3px 8px;text-align:left}}
th{{background:#f5f5f5}}td.num{{text-align:right;font-variant-numeric:tabular-nums}}td.what{{color:#555;font-size:12px}}
pre{{background:#f5f5f5;padding:8px;overflow-x:auto;white-space:pre-wrap}}
.plots img{{max-width:100%;margin:6px 12px 6px 0;border:1px solid #eee}}
.step{{display:grid;grid-template-columns:220px 1fr;gap:8px;border:1px solid #e0e0e0;border-radius:6px;padding:6px;margin:6px 0}}
.shead p{{margin:2px 0;font-size:12px;overflow-wrap:anywhere}}.shead pre{{font-size:11px;max-height:160px;overflow:auto}}
.hist summary{{font-size:12px;cursor:pointer}}.changed{{color:#455a64}}.sel{{color:#37474f}}
.cards{{display:flex;flex-wrap:wrap;gap:6px;align-items:flex-start}}
.card{{flex:0 0 auto;min-width:140px;max-width:200px;border-radius:5px;padding:4px;font-size:11px;background:#fff}}
.card.recent{{border:2px solid #1e88e5}}.card.kept{{opacity:.8}}
.card.promoted{{border:2px solid #fb8c00;background:#fff8e1}}.card.current{{border:2px solid #212121}}
.ehead{{font-weight:600;margin-bottom:2px}}.tag{{font-weight:400;border-radius:6px;padding:0 4px;background:#e3f2fd}}
.tag.kept{{background:#eceff1}}.sum{{margin:2px 0 0;white-space:nowrap;overflow:hidden;text-overflow:ellipsis}}
.why{{margin:2px 0;color:#e65100}}
.stext{{font-size:10px;line-height:1.3;max-height:44px;overflow:auto;margin:2px 0 0;padding:2px 3px}}.stext.none{{color:#9e9e9e}}
.thumb{{height:{THUMB_HEIGHT}px;max-width:100%;background-size:100% 100%;background-repeat:no-repeat}}
.thumb[data-full]{{cursor:zoom-in}}.thumb[data-full]:focus{{outline:2px solid #1e88e5}}
.thumb.missing{{width:75px;background:#eee;color:#757575;display:flex;align-items:center;justify-content:center;text-align:center}}
.badge{{display:inline-block;border-radius:8px;padding:0 6px;font-size:12px;background:#eceff1;margin-left:6px}}
.badge.fired{{background:#ffe0b2}}.legend span{{margin-right:14px}}.legend-notes{{font-size:12px;color:#555}}
.swatch{{display:inline-block;width:14px;height:10px;margin-right:4px;vertical-align:middle}}
.fallback,.parse-error{{color:#b71c1c}}
#cc-lightbox{{position:fixed;inset:0;background:rgba(0,0,0,.88);z-index:10;overflow:auto;text-align:center;padding:12px}}
#cc-lightbox[hidden]{{display:none}}#cc-lightbox img{{max-width:96vw;max-height:88vh;cursor:zoom-in;background:#fff}}
#cc-lightbox.actual img{{max-width:none;max-height:none;cursor:zoom-out}}#cc-lightbox p{{color:#eee;margin:4px}}
"""
