"""Benchmark: OCR time per 1920x1080 screenshot, and that OCR stays off the agent's step.

1. ``ocr_ms``: the engine alone (``archive.ocr.engine``) on ``probe`` text-filled 1080p PNGs (a window
   of ~20 lines of text, like a back-office screen), after one warm-up call that loads the models.
2. The user-shaped LangGraph agent of :mod:`.agent_overhead` (``screenshot -> model -> execute``, the
   memory's ``observe_node``/``decide_node``, Recent-``B``) on the same kind of screens, alternating two
   memories: OCR off (``engine: none``) and OCR on, whose screenshot node returns no ``screen_text`` so
   every screen is OCR'd in the background. A step is timed between two entries into the screenshot
   node, as in :mod:`.agent_overhead`. ``drain_s`` is how long the OCR backlog took to finish after the
   episode returned: the step did not wait for it.

Wall time of a step with OCR on includes CPU contention from the OCR thread on the same cores (the step
does not wait for OCR, but shares the machine with it); ``cpu_step_ms`` counts all threads of the process,
so with OCR on it includes the OCR work done during that step.

Run: ``python -m causalcache_lab.bench.ocr_overhead [--engine rapidocr] [--steps 12]``
"""

import argparse
import io
import json
import statistics
import time
from pathlib import Path
from typing import Any

from causalcache_lab.bench.agent_overhead import _episode
from causalcache_lab.bench.stats import machine_info, owns_workdir, percentiles

__all__ = ["run_ocr_overhead", "text_screens"]

SCREEN = (1920, 1080)
_WORDS = ("Order", "Invoice", "Desk Lamp", "Shipped", "Pending", "Refund", "Customer", "Total", "EUR")


def text_screens(count: int, size: tuple[int, int] = SCREEN) -> list[bytes]:
    """``count`` distinct PNGs of ``size``: a desktop with a window of about 20 lines of text."""
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=28)
    out = []
    for index in range(count):
        image = Image.new("RGB", size, (222, 226, 232))
        draw = ImageDraw.Draw(image)
        draw.rectangle([120, 90, 1500, 1000], fill=(255, 255, 255), outline=(120, 120, 120))
        for line in range(20):
            words = " ".join(_WORDS[(index + line + k) % len(_WORDS)] for k in range(5))
            draw.text(
                (150, 110 + 43 * line), f"{words}  #{1000 + 37 * index + line}", fill=(20, 20, 20), font=font
            )
        buf = io.BytesIO()
        image.save(buf, format="PNG", compress_level=1)
        out.append(buf.getvalue())
    return out


def _memory(home: Path, budget: int, engine: str) -> Any:
    from causalcache_memory.config import parse_config
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    home.mkdir(parents=True, exist_ok=True)
    config = {
        "budget": budget,
        "allocation": {"allocator": "recent"},
        "archive": {"url": str(home / "archive"), "ocr": {"engine": engine}},
        "checkpointer": {"kind": "sqlite", "path": str(home / "checkpoints.sqlite")},
    }
    return CausalCacheMemory(config=parse_config(config))


def _ocr_alone(engine: str, screens: list[bytes], probe: int) -> dict[str, Any]:
    from causalcache_memory.archive.ocr import build_ocr
    from causalcache_memory.config import OcrConfig

    reader = build_ocr(OcrConfig(engine=engine))
    assert reader is not None
    reader.read(screens[0])  # loads the models
    times, chars = [], []
    for png in screens[1 : 1 + probe]:
        start = time.perf_counter()
        chars.append(len(reader.read(png)))
        times.append((time.perf_counter() - start) * 1e3)
    return {"ocr_ms": percentiles(times), "chars_per_screen": statistics.median(chars)}


@owns_workdir
def run_ocr_overhead(
    *,
    engine: str = "rapidocr",
    steps: int = 12,
    budget: int = 4,
    repeats: int = 1,
    probe: int = 3,
    workdir: str | Path,
) -> dict[str, Any]:
    """OCR time per 1080p screenshot and the agent's step with OCR off and on (see the module doc)."""
    root = Path(workdir)
    screens = text_screens(max(steps + 1, probe + 1))
    out: dict[str, Any] = {"engine": engine, "screen": list(SCREEN), **_ocr_alone(engine, screens, probe)}
    warmup = min(budget, max(0, steps - 1))
    steps_ms: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    drain, ocr_done = [], 0
    for rep in range(repeats):
        for mode in ("off", "on"):
            with _memory(root / f"{mode}-{rep}", budget, engine if mode == "on" else "none") as memory:
                times, _ = _episode(memory, screens, steps, budget, f"{mode}-{rep}")
                start = time.perf_counter()
                memory.screen_texts.drain(3600)
                if mode == "on":
                    drain.append(time.perf_counter() - start)
                    ocr_done += memory.screen_texts.counts["ocr"]
            steps_ms[mode] += times[warmup:]
    for mode, samples in steps_ms.items():
        out[f"step_ms_ocr_{mode}"] = percentiles([w for w, _ in samples])
        out[f"cpu_step_ms_ocr_{mode}"] = round(statistics.median(c for _, c in samples), 3)
    out["added_step_ms"] = round(out["step_ms_ocr_on"]["p50"] - out["step_ms_ocr_off"]["p50"], 3)
    out["drain_s"] = [round(d, 2) for d in drain]
    out["screens_ocrd"] = ocr_done
    out["steps"], out["repeats"] = steps, repeats
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", default="rapidocr", choices=["rapidocr", "tesseract"])
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    result = run_ocr_overhead(engine=args.engine, steps=args.steps, repeats=args.repeats)
    print(json.dumps({"ocr_overhead": result, "machine": machine_info()}, indent=2))
