"""Benchmark ``ocr``: screen text at agent speed on the 40-step 1080p desktop episode.

For each engine (rapidocr; tesseract when installed) on the episode of
:func:`~causalcache_lab.bench.ocr_episode.desktop_episode` (pixel-exact ground truth per screen):

1. **Before**: rapidocr's own default pipeline (``RapidOCR()(image)``: detection on the full frame, angle
   classifier, batches of 6), CPU per screen on ``probe`` screens (rapidocr only).
2. **Full read**: every screen read whole by the engine as configured now (no memo, no increments), CPU
   per screen; word recall/precision against the ground truth.
3. **Agent run**: a LangGraph agent through ``CausalCacheMemory`` (observe/decide nodes, the archive and
   checkpoints: the memory's other work) whose model call is paced to one step every ``interval`` seconds,
   screens without ``screen_text`` so every one is OCR'd in the background, incrementally per thread.
   Reports CPU per read (median, p95: thread CPU plus child processes), full vs incremental reads, the
   share of screens whose text was ready at the next decision (``ScreenTextWriter.at_decision``) and of
   decisions with every earlier screen's text ready, and the final texts' word recall/precision against
   the ground truth and against the full read.
4. **Selector agreement**: the bundled selector decides each step of the episode's trace (click witness
   on the element the next step acts on) twice, once reading the agent run's incremental text (and its
   ``get_lines`` boxes), once the full read's; the share of decisions with the same selected set is
   reported, with the guard on (deployed default; a fallback decision is Recent-B in both) and off.

Words: whitespace tokens, lower-cased, surrounding punctuation stripped; recall and precision count
multisets (a word twice on a screen counts twice). CPU uses one onnxruntime thread (``threads: 1``); set
``OMP_NUM_THREADS=1`` for the run. Run: ``causalcache bench --scenarios ocr``.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from pathlib import Path
from typing import Any

from causalcache_lab.bench.ocr_episode import EpisodeScreen, desktop_episode, words
from causalcache_lab.bench.stats import owns_workdir

__all__ = ["run_ocr_speed", "word_scores"]


def word_scores(predicted: list[str], truth: list[str]) -> tuple[int, int, int]:
    """``(matched, predicted words, true words)`` over texts (multiset match per screen, summed)."""
    matched = total_p = total_t = 0
    for pred, true in zip(predicted, truth, strict=True):
        p, t = Counter(words(pred)), Counter(words(true))
        matched += sum((p & t).values())
        total_p += sum(p.values())
        total_t += sum(t.values())
    return matched, total_p, total_t


def _recall_precision(predicted: list[str], truth: list[str]) -> dict[str, float]:
    matched, total_p, total_t = word_scores(predicted, truth)
    return {"recall": round(matched / max(1, total_t), 4), "precision": round(matched / max(1, total_p), 4)}


def _cpu_stats(samples: list[float]) -> dict[str, float]:
    data = sorted(samples)
    if not data:
        return {"median": float("nan"), "p95": float("nan"), "mean": float("nan"), "n": 0}
    pos = (len(data) - 1) * 0.95
    lo, hi = int(pos), min(len(data) - 1, int(pos) + 1)
    p95 = data[lo] + (data[hi] - data[lo]) * (pos - lo)
    return {
        "median": round(statistics.median(data), 3),
        "p95": round(p95, 3),
        "mean": round(statistics.mean(data), 3),
        "n": len(data),
    }


def _by_change(per_read: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """CPU per read grouped by the step's change (typing, scroll, app switch, ...) and by full/incremental:
    where the p95 comes from."""
    groups: dict[str, list[float]] = {}
    for read in per_read:
        key = f"{read['change'] or 'first'}/{'full' if read['full'] else 'incremental'}"
        groups.setdefault(key, []).append(read["cpu_s"])
    return {key: {**_cpu_stats(cpu), "max": round(max(cpu), 3)} for key, cpu in sorted(groups.items())}


def _engine(name: str, **kwargs: Any) -> Any:
    from causalcache_memory.archive.ocr import build_ocr
    from causalcache_memory.config import OcrConfig

    engine = build_ocr(OcrConfig(engine=name))  # type: ignore[arg-type]
    for key, value in kwargs.items():
        setattr(engine, key, value)
    return engine


def _cpu() -> float:
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.thread_time() + children.ru_utime + children.ru_stime


def _before(screens: list[EpisodeScreen], probe: int) -> dict[str, Any]:
    """rapidocr's default pipeline on ``probe`` screens (CPU per screen, recall vs ground truth)."""
    import numpy as np
    import rapidocr_onnxruntime

    from causalcache_memory.archive.ocr import decode_rgb

    engine = rapidocr_onnxruntime.RapidOCR(intra_op_num_threads=1)
    engine(np.ascontiguousarray(decode_rgb(screens[0].png)[:, :, ::-1]))  # loads the models
    picks = screens[1 :: max(1, (len(screens) - 1) // probe)][:probe]
    cpu, texts = [], []
    for screen in picks:
        bgr = np.ascontiguousarray(decode_rgb(screen.png)[:, :, ::-1])
        start = _cpu()
        result, _ = engine(bgr)
        cpu.append(_cpu() - start)
        texts.append("\n".join(str(line[1]) for line in result or ()))
    return {"cpu_s": _cpu_stats(cpu), **_recall_precision(texts, [s.text for s in picks])}


def _full_reads(name: str, screens: list[EpisodeScreen]) -> tuple[dict[str, Any], list[Any]]:
    from causalcache_memory.archive.ocr import decode_rgb, join_lines

    engine = _engine(name, **({"memo_size": 0} if name == "rapidocr" else {}))
    engine.read_lines(decode_rgb(screens[0].png)[:64, :64])  # loads the models
    cpu, results = [], []
    for screen in screens:
        rgb = decode_rgb(screen.png)
        start = _cpu()
        lines = engine.read_lines(rgb)
        cpu.append(_cpu() - start)
        results.append(lines)
    texts = [join_lines(lines) for lines in results]
    return {"cpu_s": _cpu_stats(cpu), **_recall_precision(texts, [s.text for s in screens])}, results


class _PacedModel:
    """A fake VLM whose call returns ``interval`` seconds after the previous one (sleeping, no CPU)."""

    def __init__(self, interval: float) -> None:
        from causalcache_lab.bench.agent_overhead import DecodingVLM

        self.inner = DecodingVLM()
        self.interval = interval
        self.last = time.perf_counter()

    @property
    def images_seen(self) -> list[int]:
        return self.inner.images_seen

    def __call__(self, messages: Any) -> Any:
        reply = self.inner(messages)
        wait = self.interval - (time.perf_counter() - self.last)
        if wait > 0:
            time.sleep(wait)
        self.last = time.perf_counter()
        return reply


def _agent_run(name: str, screens: list[EpisodeScreen], interval: float, root: Path) -> dict[str, Any]:
    from langchain_core.messages import HumanMessage

    from causalcache_lab.bench import agent_overhead
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.config import parse_config
    from causalcache_memory.integrations.langgraph import CausalCacheMemory

    root.mkdir(parents=True, exist_ok=True)
    config = {
        "budget": 3,
        "allocation": {"allocator": "recent"},
        "archive": {"url": str(root / "archive"), "ocr": {"engine": name, "close_timeout_s": 600}},
        "checkpointer": {"kind": "sqlite", "path": str(root / "checkpoints.sqlite")},
    }
    archive = LocalArchive(root / "archive")
    memory = CausalCacheMemory(config=parse_config(config), archive=archive)
    writer = memory.screen_texts
    from causalcache_memory.archive.ocr import decode_rgb

    writer.engine.read_lines(decode_rgb(screens[0].png)[:64, :64])  # loads the models before the clock
    model = _PacedModel(interval)
    steps = len(screens) - 1
    marks: list[tuple[float, float, float]] = []
    graph = agent_overhead._build(memory, [s.png for s in screens], steps, 3, marks, model)  # type: ignore[arg-type]
    start = time.perf_counter()
    graph.invoke(
        {"messages": [HumanMessage(content="Answer the mail about the delayed order")]},
        {"configurable": {"thread_id": f"ocr-{name}"}, "recursion_limit": 10 * steps + 10},
    )
    episode_s = time.perf_counter() - start
    drain_start = time.perf_counter()
    writer.drain(3600)
    drain_s = time.perf_counter() - drain_start
    stats = writer.stats()
    reads = list(writer.reads)
    shas = [archive.put(s.png).sha256 for s in screens]  # the same bytes: the stored blobs' hashes
    texts = [archive.get_text(sha) or "" for sha in shas]
    lines = {sha: writer.get_lines(sha) for sha in shas}
    memory.close()
    cpu = [r["cpu_s"] for r in reads]
    index = {sha: i for i, sha in enumerate(shas)}
    per_read = []
    for order, r in enumerate(reads):
        i = index.get(r["sha256"], -1)
        matched, _, total = word_scores([texts[i]], [screens[i].text]) if i >= 0 else (0, 0, 0)
        per_read.append(
            {
                "screen": i,
                "order": order,
                "change": screens[i].change if i >= 0 else "",
                "full": r["full"],
                "read_share": r["read_share"],
                "cpu_s": r["cpu_s"],
                "recall": round(matched / max(1, total), 4),
            }
        )
    return {
        "episode_s": round(episode_s, 2),
        "drain_s": round(drain_s, 2),
        "cpu_s": _cpu_stats(cpu),
        "cpu_s_incremental": _cpu_stats([r["cpu_s"] for r in reads if not r["full"]]),
        "cpu_s_full": _cpu_stats([r["cpu_s"] for r in reads if r["full"]]),
        "reads": len(reads),
        "full_reads": stats["full_reads"],
        "incremental_reads": stats["incremental_reads"],
        "dropped": stats["dropped"],
        "screens_ready": stats["screens_ready"],
        "screens_late": stats["screens_late"],
        "screens_missing": stats["screens_missing"],
        "ready_share": stats["ready_share"],
        "decisions": stats["decisions"],
        "decisions_text_ready_share": round(stats["decisions_text_ready"] / max(1, stats["decisions"]), 4),
        "cpu_s_by_change": _by_change(per_read),
        "per_read": per_read,
        "_texts": texts,
        "_shas": shas,
        "_lines": lines,
    }


class _Source:
    """A screen-text source over fixed ``{sha: text}`` and ``{sha: lines}`` maps."""

    def __init__(self, texts: dict[str, str], lines: dict[str, Any]) -> None:
        self.texts, self.lines = texts, lines

    def get_text(self, sha256: str) -> str | None:
        return self.texts.get(sha256)

    def get_lines(self, sha256: str) -> Any:
        return self.lines.get(sha256)


def _agreement(
    screens: list[EpisodeScreen], shas: list[str], a: _Source, b: _Source, budget: int
) -> dict[str, Any]:
    """Share of the selector's decisions on the episode's trace that select the same set with ``a``/``b``."""
    from causalcache_memory.actions.model import Action
    from causalcache_memory.allocation import AllocationContext
    from causalcache_memory.selector.allocator import SelectorAllocator
    from causalcache_memory.trace import Trace

    out: dict[str, Any] = {}
    for guard in (True, False):
        selectors = [SelectorAllocator(ood_guard=guard, screen_text=src) for src in (a, b)]
        trace = Trace("Answer the mail about the delayed order", episode_id="ocr-bench", platform="desktop")
        trace.observe(shas[0], size=(1920, 1080))
        same = fell_back = total = 0
        for t in range(1, len(screens)):
            x, y = screens[t - 1].click
            trace.record(Action("click", x=x, y=y), screens[t - 1].action, shas[t], app=screens[t - 1].app)
            if trace.t <= budget + 1:
                continue
            wx, wy = screens[t].click
            picks = []
            for selector in selectors:
                ctx = AllocationContext(trace, budget, None, witness=Action("click", x=wx, y=wy))
                allocation = selector.allocate(ctx)
                picks.append((tuple(allocation.selected), allocation.info.get("fallback")))
            total += 1
            same += int(picks[0][0] == picks[1][0])
            fell_back += int(picks[0][1] is not None)
        out["guard_on" if guard else "guard_off"] = {
            "decisions": total,
            "same_selection_share": round(same / max(1, total), 4),
            "fallback_decisions": fell_back,
        }
    return out


@owns_workdir
def run_ocr_speed(
    *,
    engines: tuple[str, ...] = ("rapidocr", "tesseract"),
    steps: int = 40,
    interval: float = 2.0,
    probe: int = 5,
    budget: int = 3,
    workdir: str | Path,
) -> dict[str, Any]:
    """The ``ocr`` scenario (see the module docstring); engines that are not installed are skipped."""
    import os

    from causalcache_memory.archive.ocr import join_lines
    from causalcache_memory.errors import MissingDependencyError

    root = Path(workdir)
    screens = desktop_episode(0, steps=steps)
    truth = [s.text for s in screens]
    out: dict[str, Any] = {
        "screen": [1920, 1080],
        "steps": steps,
        "interval_s": interval,
        "words_per_screen": round(statistics.mean(len(words(t)) for t in truth), 1),
        "lines_per_screen": round(statistics.mean(len(s.lines) for s in screens), 1),
        "changes": dict(Counter(s.change for s in screens)),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "loadavg_1m_start": round(os.getloadavg()[0], 2),
    }
    for name in engines:
        try:
            _engine(name)
        except MissingDependencyError as exc:
            out[name] = {"skipped": str(exc)}
            continue
        result: dict[str, Any] = {}
        if name == "rapidocr":
            result["before"] = _before(screens, probe)
        result["full_read"], full_lines = _full_reads(name, screens)
        run = _agent_run(name, screens, interval, root / name)
        texts, shas, lines = run.pop("_texts"), run.pop("_shas"), run.pop("_lines")
        full_texts = [join_lines(x) for x in full_lines]
        run["vs_truth"] = _recall_precision(texts, truth)
        run["vs_full_read"] = _recall_precision(texts, full_texts)
        run["recall_share_of_full_read"] = round(
            run["vs_truth"]["recall"] / max(1e-9, result["full_read"]["recall"]), 4
        )
        result["agent"] = run
        try:
            full_source = _Source(
                dict(zip(shas, full_texts, strict=True)),
                {
                    sha: [ln.relative(1920, 1080) for ln in fl]
                    for sha, fl in zip(shas, full_lines, strict=True)
                },
            )
            inc_source = _Source(dict(zip(shas, texts, strict=True)), lines)
            result["selector_agreement"] = _agreement(screens, shas, inc_source, full_source, budget)
        except (ImportError, OSError) as exc:  # the selector package or its model missing
            result["selector_agreement"] = {"skipped": f"{type(exc).__name__}: {exc}"}
        out[name] = result
    out["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
    return {"ocr": out}
