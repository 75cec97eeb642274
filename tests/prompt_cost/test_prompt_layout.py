"""The cache-friendly layout (issue 50, item 3) and the cache figures in stats and the report (item 5)."""

from __future__ import annotations

import pytest

from causalcache_memory import Action, Trace, make_allocation
from causalcache_memory.allocation import PrefixPricer, PricedAllocator, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.cli.report import cache_cost_html, counts_line
from causalcache_memory.controller import MemoryController
from causalcache_memory.decisions.counts import DecisionStats
from causalcache_memory.errors import RenderError
from causalcache_memory.prompt_cost import (
    AutomaticPrefixCache,
    BreakpointCache,
    PatchImageRule,
    PromptCostMeter,
    account_prompt,
    image_sizes_of,
    simulate_cache,
)
from causalcache_memory.render import RenderOptions, render_prompt, summaries_message
from tests.prompt_cost.test_meter import RULE, EchoPolicy, chars

SIZE = (640, 480)


def trace_of(n: int) -> Trace:
    trace = Trace("open the settings", episode_id="ep")
    trace.observe("0" * 64, size=SIZE)
    for i in range(1, n + 1):
        trace.record(Action("click", x=0.5, y=0.5), f"click {i}", f"{i:064x}", screenshot_size=SIZE)
    return trace


def render(n: int, selected: tuple[int, ...], layout: str):
    trace = trace_of(n)
    allocation = make_allocation(selected, t=trace.t, budget=len(selected), allocator="test")
    return trace, render_prompt(trace, allocation, options=RenderOptions(layout=layout))  # type: ignore[arg-type]


def test_cache_friendly_is_the_same_messages_in_another_order() -> None:
    _, old = render(5, (2, 4), "retained_turns")
    _, new = render(5, (2, 4), "cache_friendly")
    assert sorted(map(repr, old.messages)) == sorted(map(repr, new.messages))
    assert old.images == new.images  # the same images in the same order: the retained turns keep theirs
    assert [m.role for m in new.messages] == [
        "system",
        "assistant",
        "user",
        "assistant",
        "user",
        "user",
        "user",
    ]
    assert summaries_message(new) is new.messages[5] and summaries_message(old) is old.messages[1]
    assert summaries_message(new).text.startswith("Task: open the settings")
    assert (old.meta["layout"], new.meta["layout"]) == ("retained_turns", "cache_friendly")


def test_an_unknown_layout_is_refused_with_its_name() -> None:
    with pytest.raises(RenderError, match="layout='sideways'"):
        RenderOptions(layout="sideways")  # type: ignore[arg-type]


def test_accounting_finds_the_summaries_in_either_layout() -> None:
    trace, old = render(5, (2, 4), "retained_turns")
    _, new = render(5, (2, 4), "cache_friendly")
    sizes = image_sizes_of(trace)
    a = account_prompt(old, tokenize=chars, image_rule=RULE, image_sizes=sizes)
    b = account_prompt(new, tokenize=chars, image_rule=RULE, image_sizes=sizes)
    assert a.total == b.total
    for part in ("system", "summaries", "screen:2", "screen:4", "response:2", "current"):
        assert a.part_total(part) == b.part_total(part) > 0, part
    assert b.end_of("screen:4") < b.end_of("summaries") < b.end_of("current")


@pytest.mark.parametrize("cache", [BreakpointCache(min_cacheable_tokens=0, anchors=("turn:-1", "end")),
                                   AutomaticPrefixCache(min_cacheable_tokens=0, block_tokens=1)])  # fmt: skip
def test_a_held_set_is_read_back_only_in_the_cache_friendly_layout(cache) -> None:
    writes = {}
    for layout in ("retained_turns", "cache_friendly"):
        prompts = []
        for n in (4, 5, 6):  # the same S = {1, 2} while the history grows
            trace, prompt = render(n, (1, 2), layout)
            prompts.append(
                account_prompt(prompt, tokenize=chars, image_rule=RULE, image_sizes=image_sizes_of(trace))
            )
        steps = simulate_cache(prompts, cache)
        turns = sum(prompts[-1].part_total(f"{kind}:{j}") for kind in ("response", "screen") for j in (1, 2))
        writes[layout] = [s.cache_write_tokens for s in steps[1:]]
        if layout == "cache_friendly":  # the turns and the old summaries are read again
            assert all(s.cache_read_tokens >= turns for s in steps[1:])
        else:  # the grown summaries come first: the turns are written again at every step
            assert all(s.cache_write_tokens >= turns for s in steps[1:])
    assert all(f < o for f, o in zip(writes["cache_friendly"], writes["retained_turns"], strict=True))


def test_stats_and_the_report_carry_the_cache_figures(tmp_path, make_png) -> None:
    meter = PromptCostMeter(tokenize=chars, image_rule=RULE, cache=BreakpointCache(min_cacheable_tokens=0, anchors=("turn:-1", "end"),
                            input_price=3.0, write_price=3.75, read_price=0.3))  # fmt: skip
    pricer = PrefixPricer(image_rule=PatchImageRule(), cache=meter.cache)
    controller = MemoryController(
        policy=EchoPolicy(), archive=LocalArchive(tmp_path / "a"), budget=2, prompt_cost=meter,
        allocator=PricedAllocator(RecentAllocator(), pricer), render_options=RenderOptions(layout="cache_friendly"),
    )  # fmt: skip
    assert pricer.layout == "cache_friendly"  # the controller told the allocator its layout
    trace = Trace("open the settings", episode_id="ep")
    controller.observe(trace, make_png((1, 2, 3)))
    records = []
    for i in range(6):
        decision = controller.decide(trace)
        records.append(decision.to_record())
        controller.record(trace, decision, make_png((i * 40 % 256, 9, i)), response="click")
    live = controller.monitor.stats()["ep"]
    controller.close()
    logged = DecisionStats.from_records(records)
    writes = sum(c["cache_write_tokens"] for r in records for c in r["prompt_cost"])
    reads = sum(c["cache_read_tokens"] for r in records for c in r["prompt_cost"])
    assert (logged.metered, logged.cache_write_tokens, logged.cache_read_tokens) == (6, writes, reads)
    assert live.to_dict() == logged.to_dict()
    assert logged.to_dict()["cache_write_per_step"] == round(writes / 6, 1) and reads > 0
    assert "cache per step: write" in counts_line(logged)
    page = cache_cost_html(records)
    assert (
        page.count('class="cc-bar"') == 6
        and f"read {records[-1]['prompt_cost'][0]['cache_read_tokens']}" in page
    )
    assert cache_cost_html([{"t": 1}]) == "" and "cache per step" not in counts_line(DecisionStats())
    assert "cache_write_tokens" not in DecisionStats().to_dict()
