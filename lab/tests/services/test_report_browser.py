"""The HTML reports in a real browser: headless Chromium opens a ``causalcache report`` page and the
demo's ``report.html``; the rendered DOM has the event cards, screenshots and pass-2 markers, the
screenshot is not blank, and the page logs no console error. On an 18-step desktop thread (issue 51
item 3): a click on a thumbnail (hit-tested where it is drawn) opens the lightbox with the screenshot at
its full resolution, the screen text is on the page, and the page is under 5,000 px tall at 1400 px
width (a probe script added to a copy of the page writes what it saw into the DOM Chromium dumps).

Chromium is the Debian package ``chromium``; the test uses ``$CAUSALCACHE_CHROMIUM`` (set by
``.ci/run``), else ``chromium`` on PATH, and skips without one (CI service ``chromium``)."""

from __future__ import annotations

import base64
import os
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests" / "integrations"))  # user_agent.py

pytestmark = [pytest.mark.slow, pytest.mark.service("chromium")]

_CONSOLE = re.compile(r"CONSOLE\(\d+\)\]|Uncaught|console\.error|:ERROR:CONSOLE", re.I)


def _chromium() -> str:
    path = os.environ.get("CAUSALCACHE_CHROMIUM") or shutil.which("chromium")
    if not path:
        pytest.skip("no chromium (apt-get install chromium; .ci/run installs it)")
    return path


def _run(page: Path, *flags: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    argv = [
        _chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
        "--virtual-time-budget=3000",
        *flags,
        page.as_uri(),
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True)


def console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if _CONSOLE.search(line)]


class _Dom(HTMLParser):
    """Counts of the report's elements in the DOM Chromium rendered."""

    def __init__(self) -> None:
        super().__init__()
        self.classes: list[set[str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.classes.append(set((dict(attrs).get("class") or "").split()))

    def count(self, *names: str) -> int:
        return sum(1 for c in self.classes if set(names) <= c)


def rendered(page: Path, tmp: Path) -> tuple[_Dom, str, Path]:
    """``(parsed DOM, console errors joined, screenshot path)`` of ``page`` in headless Chromium."""
    dom = _run(page, "--dump-dom", tmp=tmp)
    shot = tmp / f"{page.stem}.png"
    _run(page, f"--screenshot={shot}", "--window-size=1280,1600", "--hide-scrollbars", tmp=tmp)
    parsed = _Dom()
    parsed.feed(dom.stdout)
    return parsed, "\n".join(console_errors(dom.stderr)), shot


def _check_screenshot(shot: Path) -> None:
    from PIL import Image

    with Image.open(shot) as image:
        assert image.size == (1280, 1600)
        colors = image.convert("RGB").getcolors(maxcolors=1 << 20) or []
    assert len(colors) > 200, f"{shot} looks blank ({len(colors)} colours)"  # screenshots are drawn


def _check_report(dom: _Dom, errors: str, steps: int) -> None:
    assert dom.count("step") == steps
    assert dom.count("card", "current") == steps
    assert dom.count("card", "recent") + dom.count("card", "promoted") > 0
    pixels = sum(1 for c in dom.classes if "thumb" in c and any(re.fullmatch(r"im\d+", x) for x in c))
    assert pixels >= steps and dom.count("thumb", "missing") == 0  # every card shows its screenshot
    assert dom.count("card", "summary") == 0  # summary-only events are collapsed into one line per row
    assert dom.count("badge", "fired") + sum(1 for c in dom.classes if c == {"badge"}) >= steps
    assert errors == ""


def test_console_errors_are_seen(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>console.error('boom'); undefined_fn();</script></body></html>")
    errors = console_errors(_run(page, "--dump-dom", tmp=tmp_path).stderr)
    assert errors, "the console check must see a page's errors, or its silence proves nothing"


def test_thread_report_in_chromium(tmp_path, capsys):
    import user_agent as ua

    from causalcache_memory.cli.main import main
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    (tmp_path / "cc.yaml").write_text(
        "budget: 2\nallocation: {allocator: recent}\narchive: {url: data/archive}\n"
        "checkpointer: {kind: sqlite, path: data/cp.sqlite}\n"
    )
    memory = CausalCacheMemory.from_yaml(tmp_path / "cc.yaml")
    graph = ua.build_agent(memory, steps=6, checkpointer=memory.checkpointer())
    graph.invoke(ua.first_input(), ua.run_config("browser-thread"))
    page = tmp_path / "thread.html"
    archive = str(tmp_path / "data" / "archive")
    assert main(["report", "--archive", archive, "--thread", "browser-thread", "--out", str(page)]) == 0
    dom, errors, shot = rendered(page, tmp_path)
    _check_report(dom, errors, steps=6)
    _check_screenshot(shot)


def test_demo_report_in_chromium(tmp_path):
    from causalcache_memory.cli.main import main

    out = tmp_path / "demo"
    assert main(["demo", "--worlds", "none", "--tasks", "6", "--out", str(out), "--min-gain", "0"]) == 0
    dom, errors, shot = rendered(out / "report.html", tmp_path)
    steps = dom.count("step")
    assert steps >= 2
    _check_report(dom, errors, steps=steps)
    assert dom.count("badge", "fired") >= 1  # the paper's rule fires pass 2: its marker is shown
    _check_screenshot(shot)
    seen = probe(out / "report.html", tmp_path)  # the timeline's screenshots enlarge, its text is shown
    assert seen["hitThumb"] and seen["shown"] and seen["natural"][0] > 2 * seen["thumbSize"][0]
    assert "(no screen text)" not in seen["text"] and "why: predicted gain" in seen["text"]


#: added to a copy of the page: measures it, clicks the first thumbnail where it is drawn and writes what it
#: saw as JSON into ``body[data-probe]``, synchronously (a wait for the image decode is not always
#: counted by headless Chromium's virtual time: the dump could come first); the lightbox's image keeps its
#: ``src``, which the test decodes from the dumped DOM
_PROBE = """
window.addEventListener("load", () => {
  const out = {height: document.documentElement.scrollHeight, width: window.innerWidth};
  const box = document.getElementById("cc-lightbox");
  out.hiddenBefore = box.hidden;
  const thumb = document.querySelector("[data-full]");
  thumb.scrollIntoView({block: "center"});
  const r = thumb.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  out.hitThumb = hit === thumb;
  out.thumbSize = [Math.round(r.width), Math.round(r.height)];
  hit.click();
  out.shown = box.hidden === false && getComputedStyle(box).display !== "none";
  out.caption = document.getElementById("cc-caption").textContent;
  out.text = document.body.innerText;
  const shown = document.getElementById("cc-full").getAttribute("src");
  document.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape", bubbles: true}));
  out.closedByEscape = box.hidden;
  hit.click();  // open again: the dumped DOM keeps the image shown
  out.sameImage = document.getElementById("cc-full").getAttribute("src") === shown;
  document.body.setAttribute("data-probe", JSON.stringify(out));
});
"""


def probe(page: Path, tmp: Path) -> dict:
    """What :data:`_PROBE` saw on ``page`` in Chromium at 1400 px width; ``natural``: the pixel size of
    the image the lightbox showed (decoded from the dumped DOM)."""
    import html
    import io
    import json

    from PIL import Image

    copy = tmp / f"{page.stem}-probe.html"
    text = page.read_text(encoding="utf-8").replace("</body>", f"<script>{_PROBE}</script></body>")
    copy.write_text(text, encoding="utf-8")
    dom = _run(copy, "--window-size=1400,900", "--dump-dom", tmp=tmp)
    assert console_errors(dom.stderr) == []
    found = re.search(r'<body[^>]*data-probe="([^"]*)"', dom.stdout)
    assert found, "the probe did not run"
    seen = json.loads(html.unescape(found.group(1)))
    src = re.search(r'<img id="cc-full"[^>]*src="data:image/[a-z]+;base64,([^"]+)"', dom.stdout)
    assert src, "the lightbox shows no image"
    with Image.open(io.BytesIO(base64.b64decode(src.group(1)))) as image:
        seen["natural"] = list(image.size)
    return seen


def test_an_18_step_report_enlarges_shows_text_and_stays_short(tmp_path):
    import report_thread as rt

    from causalcache_memory.cli.report import write_thread_report

    trace, log, archive = rt.build(tmp_path)
    page = write_thread_report(trace, log, archive, tmp_path / "r18.html", thread="eighteen")
    seen = probe(page, tmp_path)
    assert seen["width"] == 1400 and seen["height"] < 5000, seen["height"]  # 18 steps at 1400 px
    assert seen["hiddenBefore"] is True and seen["hitThumb"] is True
    assert seen["thumbSize"][1] < 200  # a thumbnail, not the full image
    assert seen["shown"] is True and seen["sameImage"] is True and "1920x1080" in seen["caption"]
    assert seen["natural"] == list(rt.SIZE)  # the full-resolution screenshot, not the thumbnail
    assert seen["closedByEscape"] is True
    assert f"Order code {rt.CODE}" in seen["text"] and "why: predicted gain +0.1834 alone" in seen["text"]
    assert seen["text"].count("Mail - Inbox") >= rt.STEPS  # the screen text under every card
