"""Per-screen CPU of the incremental reader at two commits, interleaved screen by screen (issue 49).

The 40-screen OCR episode (:func:`~causalcache_lab.bench.ocr_episode.desktop_episode`) is read in order,
one thread, by two :class:`~causalcache_memory.archive.ocr_incremental.IncrementalReader` instances with
their own rapidocr engines: this checkout's and the one at ``--old`` (its ``ocr_incremental.py`` loaded
from git; the rest of the library is this checkout's). Screen ``t`` is read by both before screen
``t + 1``, in alternating order, so both see the same machine load. A screen equal to an earlier one
pixel for pixel is skipped (the writer finds its text in the archive). Reports thread CPU per read
(median, p95, sum), full reads, and word recall/precision against the generator's ground truth.

Command: ``OMP_NUM_THREADS=1 python -m causalcache_lab.bench.ocr_compare --old 6a6bd08 --json out.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

__all__ = ["compare"]


def _old_reader_class(commit: str) -> Any:
    source = subprocess.run(
        ["git", "show", f"{commit}:causalcache_memory/archive/ocr_incremental.py"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "ocr_incremental_old.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("ocr_incremental_old", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module.IncrementalReader


def compare(old: str, steps: int = 40) -> dict[str, Any]:
    """Rows per screen and a summary per reader (``old``, ``new``); see the module docstring."""
    from causalcache_lab.bench.ocr_episode import desktop_episode, words
    from causalcache_lab.bench.ocr_speed import _cpu_stats
    from causalcache_memory.archive.ocr import RapidOcrEngine, decode_rgb
    from causalcache_memory.archive.ocr_incremental import IncrementalReader

    screens = desktop_episode(0, steps=steps)
    readers = {"old": _old_reader_class(old)(RapidOcrEngine(1)), "new": IncrementalReader(RapidOcrEngine(1))}
    for reader in readers.values():
        reader.engine.read_lines(decode_rgb(screens[0].png)[:64, :64])  # loads the models
    rows, seen = [], set()
    for t, screen in enumerate(screens):
        if screen.png in seen:
            continue
        seen.add(screen.png)
        rgb, truth = decode_rgb(screen.png), Counter(words(screen.text))
        row: dict[str, Any] = {"screen": t, "change": screen.change}
        for name in list(readers) if t % 2 == 0 else list(readers)[::-1]:
            start = time.thread_time()
            result = readers[name].read(rgb, "episode")
            cpu = time.thread_time() - start
            got = Counter(w for line in result.lines for w in words(line.text))
            row[name] = {
                "cpu_s": round(cpu, 4),
                "full": result.full,
                "read_share": round(result.read_share, 4),
                "matched": sum((truth & got).values()),
                "predicted": sum(got.values()),
                "true": sum(truth.values()),
            }
        rows.append(row)
    summary = {}
    for name in readers:
        matched = sum(r[name]["matched"] for r in rows)
        summary[name] = {
            "cpu_s": _cpu_stats([r[name]["cpu_s"] for r in rows]),
            "cpu_s_sum": round(sum(r[name]["cpu_s"] for r in rows), 3),
            "full_reads": sum(r[name]["full"] for r in rows),
            "recall": round(matched / max(1, sum(r[name]["true"] for r in rows)), 4),
            "precision": round(matched / max(1, sum(r[name]["predicted"] for r in rows)), 4),
        }
    return {"old": old, "reads": len(rows), "summary": summary, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--old", required=True, help="commit whose ocr_incremental.py is the baseline")
    parser.add_argument("--json", help="write the rows and the summary here")
    args = parser.parse_args(argv)
    out = compare(args.old)
    print(json.dumps(out["summary"], indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
