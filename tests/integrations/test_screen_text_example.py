"""examples/langgraph_screen_text_agent.py: the 1920x1080 user-shaped agent whose screenshot node returns
``screen_text``. Run short: the text reaches the archive and what the allocator reads at decision time."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from causalcache_memory.allocation.base import make_allocation, recent_b

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_screen_text_agent.py"
STEPS = 6


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("example_screen_text_agent", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # typing.get_type_hints resolves the state schema through it
    spec.loader.exec_module(module)
    return module


class TextReader:
    """A witness-taking allocator that reads every event's screen text from the archive it is given, as
    the learned selector does (``ctx.archive.get_text``), then keeps Recent-B."""

    name, uses_witness = "text_reader", True

    def __init__(self) -> None:
        self.seen: list[list[str | None]] = []

    def allocate(self, ctx: Any) -> Any:
        if ctx.archive is not None:  # (the memory's warm-up runs on a synthetic trace, no archive)
            shas = [e.pre_screenshot for e in ctx.trace.events] + [ctx.trace.current_screenshot]
            self.seen.append([ctx.archive.get_text(sha) for sha in shas])
        return make_allocation(recent_b(ctx.t, ctx.budget), t=ctx.t, budget=ctx.budget, allocator=self.name)


def test_screen_text_reaches_the_archive_and_the_selectors_source(tmp_path):
    example = _example()
    reader = TextReader()
    run = example.main(str(tmp_path / "run"), steps=STEPS, allocation=reader)
    memory, graph, config = run["memory"], run["graph"], run["config"]
    trace = memory.trace(graph, config)
    archive = memory.resolve_archive()
    shas = [e.pre_screenshot for e in trace.events] + [trace.current_screenshot]
    expected = ["\n".join(example.labels_of(step, STEPS)) for step in range(STEPS + 1)]
    assert [archive.get_text(sha) for sha in shas] == expected  # durable, in the archive
    decisions = reader.seen
    assert len(decisions) == STEPS
    for t, texts in enumerate(decisions, start=1):
        assert texts == expected[:t]  # at decision t: every screen so far has its text, the current too
    assert example.ORDER in expected[1] and run["summary"]["texts"]["given"] == STEPS + 1
    assert "19.90 EUR" not in repr(graph.get_state(config).values)  # screen text never enters state
    memory.close()


def test_without_screen_text_the_screens_have_no_text_and_stats_are_reported(tmp_path):
    from causalcache_memory.selector import SelectorAllocator
    from causalcache_memory.selector.ood_refit import GUARD_BEFORE_TRY2

    # the model's guard on every decision (the guard before try 2): what the masked patterns change
    before = SelectorAllocator(**GUARD_BEFORE_TRY2)
    run = _example().main(str(tmp_path / "run"), steps=STEPS, screen_text=False, allocation=before)
    memory, graph, config = run["memory"], run["graph"], run["config"]
    trace = memory.trace(graph, config)
    archive = memory.resolve_archive()
    assert all(archive.get_text(e.pre_screenshot) is None for e in trace.events)
    stats = run["summary"]["stats"]
    assert stats["decisions"] == STEPS and run["summary"]["texts"]["given"] == 0
    # no screen text and no app labels: the guard judges each featurized decision without both groups,
    # against that pattern's threshold in the bundled model's metadata, and the summary counts its verdicts
    log = memory.episode_log(graph, config)
    guarded = [r for r in log if "ood_distance" in r]
    assert guarded and all(r["ood_masked"] == "app+text" for r in guarded)
    limit = _bundled_guard().mask_thresholds["app+text"]
    assert all((r.get("fallback") == "ood") == (r["ood_distance"] > limit) for r in guarded)
    flagged = sum(r.get("fallback") == "ood" for r in log)
    assert len(log) == STEPS and run["summary"]["ood_share"] == round(flagged / STEPS, 3)
    memory.close()


def _bundled_guard() -> Any:
    import json

    from causalcache_memory.selector.allocator import bundled_model_path
    from causalcache_memory.selector.features import FEATURE_SCHEMA
    from causalcache_memory.selector.ood import load_guard

    meta = json.loads((bundled_model_path().parent / "metadata.json").read_text(encoding="utf-8"))
    return load_guard(meta["ood"]["guard"], [n for n, _ in FEATURE_SCHEMA])
