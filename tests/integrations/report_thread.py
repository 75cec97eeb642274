"""An 18-step desktop thread for the report's tests: 1920x1080 screenshots with drawn text, each with its
screen text in the archive, and decision records as the learned selector writes them (B = 4; at t = 9
and t = 15 event 2, the screen holding the order code, is promoted with its ``promoted_gain``; t = 12
declined by the guard). Shared by tests/integrations/test_report_html.py and the browser test
(lab/tests/services/test_report_browser.py)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from causalcache_memory.actions.model import Action
from causalcache_memory.archive import LocalArchive
from causalcache_memory.trace import Trace

GOAL = "Copy the order code from the Globex invoice into the ticket form"
STEPS = 18
BUDGET = 4
SIZE = (1920, 1080)
CODE = "TK-3781"
PROMOTED = {9: 2, 15: 2}  # t -> the promoted event
DECLINED = 12


def screen_text(i: int) -> str:
    """The text drawn on screen ``i`` (screen 2 holds the order code)."""
    lines = [f"Mail - Inbox ({20 + i})", "Search mail", f"Step {i} of the errand"]
    if i == 2:
        lines += ["Invoice from Globex", f"Order code {CODE}", "Total $412.00"]
    else:
        lines += [f"Newsletter {i}", f"Ticket form field {i}"]
    return "\n".join(lines)


def screen(i: int) -> bytes:
    image = Image.new("RGB", SIZE, (230 - 5 * i, 236, 245))
    draw = ImageDraw.Draw(image)
    draw.rectangle([80, 60, 1840, 140], fill=(40, 80 + 6 * i, 160))
    for k, line in enumerate(screen_text(i).splitlines()):
        draw.text((120, 200 + 60 * k), line, fill=(0, 0, 0))
    buf = io.BytesIO()
    image.save(buf, format="PNG", compress_level=1)
    return buf.getvalue()


def build(root: Path) -> tuple[Trace, list[dict[str, Any]], LocalArchive]:
    """``(trace, decision log, archive)`` of the thread (module doc)."""
    archive = LocalArchive(root / "archive")
    shas = []
    for i in range(STEPS + 1):
        sha = archive.put(screen(i)).sha256
        archive.put_text(sha, screen_text(i))
        shas.append(sha)
    trace = Trace(GOAL, episode_id="report-thread", platform="desktop")
    trace.observe(shas[0], size=SIZE)
    log = []
    for t in range(1, STEPS + 1):
        log.append(record(t))
        action = Action("type", text=CODE) if t in PROMOTED else Action("click", x=0.1 * (t % 9), y=0.5)
        trace.record(action, f"Action: {action.type}", shas[t], screenshot_size=SIZE)
    return trace, log, archive


def record(t: int) -> dict[str, Any]:
    """The decision record at ``t`` (B = 4), as the learned selector writes it."""
    recent = list(range(max(1, t - BUDGET), t))
    selected = list(recent)
    rec: dict[str, Any] = {"t": t, "budget": BUDGET, "allocator": "selector", "recent": recent}
    rec.update({"min_gain": 0.0421, "threshold_from": "fixed", "predicted_gain": 0.0, "second_pass": False})
    if len(recent) == t - 1:
        rec.update({"selected": selected, "k": 0, "action": None})
        return rec
    rec["top_gain"] = 0.0102
    if t == DECLINED:
        rec.update({"fallback": "ood", "ood_group": "image", "ood_distance": 9.1})
        rec.pop("top_gain")
    if t in PROMOTED:
        selected = sorted([PROMOTED[t], *recent[1:]])
        rec.update(
            {"predicted_gain": 0.1834, "top_gain": 0.1834, "promoted_gain": {str(PROMOTED[t]): 0.1834}}
        )
        rec.update({"second_pass": True, "proposal": {"type": "type", "text": "0000"}})
    rec.update({"selected": selected, "k": int(t in PROMOTED), "action": None})
    return rec
