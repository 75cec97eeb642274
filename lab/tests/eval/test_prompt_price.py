"""The lab's prompt-cache figures: the stand-in meter, and the demo table's cache column (issue 50, item 5)."""

from __future__ import annotations

from causalcache_lab.eval.prompt_price import MultiMeter, make_meter, stand_in_tokenize
from causalcache_lab.eval.report_text import format_table
from causalcache_lab.eval.summary import summarize
from causalcache_lab.eval.world_agent import EpisodeOutcome
from causalcache_memory import Action, Trace, make_allocation
from causalcache_memory.render import RenderOptions, render_prompt


def record(t: int, write: int, read: int) -> dict:
    call = {
        "cache_write_tokens": write,
        "cache_read_tokens": read,
        "prompt_tokens": write + read,
        "cost": 0.01,
    }
    return {"t": t, "k": 0, "second_pass": False, "prompt_cost": [call]}


def outcome(arm: str, task: str, split: str, log: list[dict]) -> EpisodeOutcome:
    return EpisodeOutcome(task, split, arm, 4, True, len(log), 0.1, log, f"{arm}-{task}", 0)


def test_the_demo_table_shows_cache_writes_and_reads_per_step() -> None:
    outcomes = [
        outcome(arm, f"t{i}", split, [record(1, w, r), record(2, w + 100, r)])
        for arm, w, r in (("recent", 1000, 0), ("causalcache", 300, 700))
        for i, split in enumerate(("memory_critical", "control"))
    ]
    results = summarize(outcomes, ["recent", "causalcache"])
    assert results["arms"]["recent"]["prompt_cache"]["cache_write_per_step"] == 1050.0
    assert results["arms"]["causalcache"]["prompt_cache"]["cache_read_per_step"] == 700.0
    table = format_table(results)
    assert "cache write/read per step" in table and "1050 / 0" in table and "350 / 700" in table
    plain = summarize([outcome("recent", "t0", "control", [{"t": 1, "k": 0}])], ["recent"])
    assert "prompt_cache" not in plain["arms"]["recent"]
    assert "cache write/read" not in format_table(plain)


def test_the_multi_meter_steps_both_caches_on_one_count() -> None:
    assert stand_in_tokenize("<|im_start|>user\\nclick it") == stand_in_tokenize(
        "<|im_start|>user\\nclick it"
    )
    meter, single = MultiMeter(), make_meter()
    trace = Trace("open the settings", episode_id="ep")
    trace.observe("0" * 64, size=(540, 1170))
    for i in range(1, 7):
        allocation = make_allocation(range(1, min(i, 4)), t=trace.t, budget=3, allocator="test")
        prompt = render_prompt(trace, allocation, options=RenderOptions(layout="cache_friendly"))
        first = meter.observe(trace, prompt)
        assert first == single.observe(trace, prompt)  # the first model is the records' (Anthropic)
        trace.record(Action("click", x=0.5, y=0.5), "click", f"{i:064x}", screenshot_size=(540, 1170))
    calls = meter.take()
    assert len(calls) == 6 and meter.take() == []
    assert all(set(c) == {"t", "anthropic", "automatic", "images", "retained"} for c in calls)
    assert [c["images"] for c in calls] == [1, 2, 3, 4, 4, 4] and [c["retained"] for c in calls] == [
        0,
        1,
        2,
        3,
        3,
        3,
    ]
    # S = {1, 2, 3} holds from t = 4: the automatic cache reads the turns back
    assert calls[-1]["automatic"].cache_read_tokens > 3 * 700
