"""How many could-swap decisions the guard declines on accessibility-dump screen text, with the screen-text
normaliser off (the text read as is, as before it) and on (issue 54 item 2).

Runs the README's user-shaped 1920x1080 LangGraph agent (tests/integrations/user_agent.py: pixel PyAutoGUI
replies, B = 4, the bundled selector with its guard on) for ``--steps`` steps with the archive's screen
text in one of two real formats of the same mail window:

* ``dump``: a 24-line accessibility dump, one element per line with its role, its quoted name and its
  bounds (``listitem "Invoice INV-4112 from Globex, Dec 3" [412,262,1500,290]``), about 1,000 characters;
* ``at``: one line per element ending with its position (``Invoice INV-4112 from Globex @(956,276)``).

Prints one JSON line per (format, normaliser) with the could-swap decisions, the share declined as OOD,
the swaps, the median guard distance and the far groups the records name (``ood_group``).

    python lab/tools/selector_dump_formats.py --steps 40
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integrations"))

import user_agent as ua

import causalcache_memory.selector.screen_text as screen_text

_VENDORS = ("ACME Corp", "Globex", "Initech", "Umbrella Ltd", "Hooli")
_MONTH = ("Nov", "Dec")


def mail_elements(index: int) -> list[tuple[str, str, tuple[int, int, int, int]]]:
    """``(role, name, (x0, y0, x1, y1))`` of the 24 elements of the mail window on screen ``index``."""
    els = [
        ("window", "Inbox - Mail", (0, 0, 1920, 1080)),
        ("menubar", "File Edit View Message Help", (0, 0, 1920, 28)),
        ("button", "Compose", (16, 44, 140, 76)),
        ("textbox", "Search mail", (160, 44, 700, 76)),
        ("button", "Archive", (720, 44, 820, 76)),
        ("button", "Delete", (830, 44, 930, 76)),
        ("treeitem", "Inbox (12)", (16, 100, 380, 128)),
        ("treeitem", "Archive", (16, 130, 380, 158)),
        ("treeitem", "Sent", (16, 160, 380, 188)),
        ("treeitem", "Drafts", (16, 190, 380, 218)),
        ("columnheader", "From", (412, 100, 700, 128)),
        ("columnheader", "Subject", (700, 100, 1300, 128)),
        ("columnheader", "Date", (1300, 100, 1500, 128)),
    ]
    for k in range(8):
        n = (index * 3 + k) % 23
        subject = f"Invoice INV-{4100 + n}" if n % 3 == 0 else f"Meeting notes {n}"
        y = 140 + 30 * k
        els.append(
            ("listitem", f"{subject} from {_VENDORS[n % 5]}, {_MONTH[n % 2]} {1 + n}", (412, y, 1500, y + 28))
        )
    if index % 5 == 2:
        els += [
            ("heading", f"Invoice INV-{4100 + index}", (412, 420, 1500, 460)),
            ("text", f"Amount due: ${120 + index}.00", (412, 470, 1000, 500)),
        ]
    else:
        els += [("heading", "No message selected", (412, 420, 1500, 460)), ("text", "", (0, 0, 0, 0))]
    els.append(("statusbar", f"{12 - index % 3} unread", (0, 1052, 1920, 1080)))
    return els


def dump_text(index: int) -> str:
    return "\n".join(
        f'{role} "{name}" [{x0},{y0},{x1},{y1}]' for role, name, (x0, y0, x1, y1) in mail_elements(index)
    )


def at_text(index: int) -> str:
    return "\n".join(
        f"{name} @({(x0 + x1) // 2},{(y0 + y1) // 2})"
        for _, name, (x0, y0, x1, y1) in mail_elements(index)
        if name
    )


FORMATS = {"dump": dump_text, "at": at_text}


def run(steps: int, fmt: str, normalize: bool) -> dict:
    identity = screen_text.normalize_screen_text, screen_text.normalize_line
    if not normalize:  # the text read as is: what the library did before the normaliser
        screen_text.normalize_screen_text = screen_text.normalize_line = lambda text: text  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as root:
            from causalcache_memory.archive.local import LocalArchive

            archive = LocalArchive(str(Path(root) / "archive"))
            for i in range(steps + 1):
                archive.put_text(archive.put(ua.screen(i)).sha256, FORMATS[fmt](i))
            memory = ua.memory_for(root)
            graph = ua.build_agent(memory, steps=steps, checkpointer=memory.checkpointer())
            with warnings.catch_warnings(record=True):
                warnings.simplefilter("always")
                graph.invoke(ua.first_input(), ua.run_config("t1"))
            log = memory.episode_log(graph, ua.run_config("t1"))
    finally:
        screen_text.normalize_screen_text, screen_text.normalize_line = identity
    could = [r for r in log if r["t"] - 1 > r["budget"]]
    dist = [float(r["ood_distance"]) for r in could if r.get("ood_distance") not in (None, "inf")]
    return {
        "format": fmt,
        "normalizer": normalize,
        "chars_per_screen": len(FORMATS[fmt](2)),
        "lines_per_screen": FORMATS[fmt](2).count("\n") + 1,
        "could_swap": len(could),
        "declined_ood": sum(r.get("fallback") == "ood" for r in could),
        "ood_share": round(sum(r.get("fallback") == "ood" for r in could) / max(len(could), 1), 3),
        "swaps": sum(r.get("k", 0) > 0 for r in could),
        "median_distance": round(statistics.median(dist), 2) if dist else None,
        "ood_masked": dict(Counter(r.get("ood_masked") or "none" for r in could if "ood_distance" in r)),
        "far_groups": dict(Counter(r.get("ood_group") for r in could if r.get("fallback") == "ood")),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    args = parser.parse_args(argv)
    for fmt in FORMATS:
        for normalize in (False, True):
            print(json.dumps(run(args.steps, fmt, normalize)), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
