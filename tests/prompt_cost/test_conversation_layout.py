"""The conversation layout and the mean-B contract (issue 50 re-plan, docs/notebook/results/price_replan.md)."""

from __future__ import annotations

import pytest

from causalcache_memory import Action, Trace, make_allocation
from causalcache_memory.allocation import AllocationContext, PrefixPricer, RecentAllocator, recent_b
from causalcache_memory.allocation.mean_b import MeanBAllocator, mean_b_sizes
from causalcache_memory.allocation.registry import build_allocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.config.loader import parse_config
from causalcache_memory.controller import MemoryController
from causalcache_memory.errors import AllocationError
from causalcache_memory.prompt_cost import (
    BreakpointCache,
    PatchImageRule,
    PromptCostMeter,
    account_prompt,
    hosted_cache_model,
    image_sizes_of,
    shared_prefix,
    simulate_cache,
)
from causalcache_memory.render import RenderOptions, render_prompt, summaries_message
from tests.prompt_cost.test_meter import RULE, EchoPolicy, chars

SIZE = (640, 480)
CONVERSATION = RenderOptions(layout="conversation")


def trace_of(n: int, episode: str = "ep") -> Trace:
    trace = Trace("open the settings", episode_id=episode)
    trace.observe("0" * 64, size=SIZE)
    for i in range(1, n + 1):
        trace.record(Action("click", x=0.5, y=0.5), f"click {i}", f"{i:064x}", screenshot_size=SIZE)
    return trace


def counted(n: int, selected: tuple[int, ...], layout: str = "conversation"):
    trace = trace_of(n)
    allocation = make_allocation(selected, t=trace.t, budget=len(selected), allocator="test")
    prompt = render_prompt(trace, allocation, options=RenderOptions(layout=layout))  # type: ignore[arg-type]
    return prompt, account_prompt(prompt, tokenize=chars, image_rule=RULE, image_sizes=image_sizes_of(trace))


def test_the_conversation_shows_the_paper_content_with_the_newest_screen_sent_once() -> None:
    paper, _ = counted(5, (2, 4, 5), "retained_turns")
    conv, _ = counted(5, (2, 4, 5))
    assert summaries_message(conv).text == summaries_message(paper).text  # every summary, the same text
    responses = lambda p: [m.text for m in p.messages if m.role == "assistant"]  # noqa: E731
    assert responses(conv) == responses(paper)
    # v_5 is the current screen: sent once, as the current image, last; history images ascending
    assert [(r.role, r.event_index) for r in conv.images] == [
        ("history", 2),
        ("history", 4),
        ("current", None),
    ]
    assert [r.sha256 for r in conv.images] == [r.sha256 for r in paper.images if r.event_index != 5]
    assert conv.meta["current_event"] == 5 and "current_event" not in paper.meta
    # the current screen is labelled as event 5's screen and carries the request
    assert conv.messages[-1].text == "Screen after step 5:What is the next action?"


def test_token_parts_are_named_and_add_up() -> None:
    _, tokens = counted(5, (2, 4, 5))
    assert sum(t + i for t, i in tokens.parts.values()) == tokens.total
    assert list(tokens.parts) == ["system", "summaries", "response:2", "screen:2", "response:4", "screen:4",
                                  "response:5", "current", "generation"]  # fmt: skip
    assert tokens.parts["screen:2"][1] == tokens.parts["current"][1] == RULE.tokens(*SIZE)


def newest_turn(tokens, event: int | None) -> int:
    """Tokens of the newest summary line, the newest response, the current screen and the generation prompt."""
    event = (
        event
        if event is not None
        else max(int(p.split(":")[1]) for p in tokens.parts if p.startswith("response:"))
    )
    line = [c for c in tokens.chunks if c.part == "summaries"][-1].n
    return (
        line
        + tokens.part_total(f"response:{event}")
        + tokens.part_total("current")
        + tokens.part_total("generation")
    )


def test_appending_the_newest_event_extends_the_previous_prompt() -> None:
    """Step t+1's tokens extend step t's up to the generation prompt when S keeps its events."""
    for n, selected in ((4, (2, 4)), (5, (1, 2, 3, 4, 5)), (3, (3,))):
        _, before = counted(n, selected)
        _, after = counted(n + 1, (*selected, n + 1))
        # everything but the generation prompt (which shares only its opening "<|im_start|>")
        assert before.total - before.part_total("generation") <= shared_prefix(before, after) < before.total
        # only the new summary line, the newest response and the current screen are new
        assert after.total - before.total + before.part_total("generation") == newest_turn(after, n + 1)


def test_dropping_an_event_rewrites_from_it() -> None:
    _, before = counted(5, (2, 3, 4, 5))
    _, after = counted(6, (3, 4, 5, 6))  # a collapse dropped 2
    assert shared_prefix(before, after) < before.end_of("summaries") - 1
    assert shared_prefix(before, after) < before.end_of("response:2")


def test_a_held_conversation_writes_one_turn_per_step_under_the_breakpoint_model() -> None:
    cache = BreakpointCache(min_cacheable_tokens=0, anchors=("summaries", "turn:-1", "end"))
    prompts = [counted(n, tuple(range(1, n + 1)))[1] for n in range(2, 7)]
    steps = simulate_cache(prompts, cache)
    for prev, now, step in zip(prompts[:-1], prompts[1:], steps[1:], strict=True):
        assert step.cache_read_tokens == prev.total - prev.part_total("generation")
        assert step.cache_write_tokens == newest_turn(now, None) - now.part_total("generation")


def test_the_hgkv_roles_hold_in_the_conversation() -> None:
    conv, _ = counted(6, (1, 3, 6))
    roles = [r.role for r in conv.images]
    assert roles.count("current") == 1 and roles[-1] == "current"
    events = [r.event_index for r in conv.images[:-1]]
    assert events == sorted(set(events)) and None not in events


def test_an_event_not_retained_is_a_summary_line_and_the_current_screen_still_comes_last() -> None:
    conv, tokens = counted(4, (1, 2))  # t-1 = 4 shown only as the current screen, without its response
    assert "current_event" not in conv.meta
    assert [m.role for m in conv.messages][-3:] == ["user", "user", "user"]  # summaries 3, 4, current
    assert "response:4" not in tokens.parts


# ---------------------------------------------------------------------------- the mean-B contract


def mean_b_sizes_over(chunk: int, steps: int, budget: int = 4) -> list[int]:
    allocator = MeanBAllocator(RecentAllocator(), chunk=chunk)
    trace = trace_of(0)
    sizes = []
    for _ in range(steps):
        out = allocator.allocate(AllocationContext(trace, budget))
        assert (out.selected and out.selected[-1] == trace.t - 1) or trace.t == 1  # the newest is appended
        sizes.append(len(out.selected))
        trace.record(Action("click", x=0.5, y=0.5), "c", f"{trace.t:064x}", screenshot_size=SIZE)
    return sizes


@pytest.mark.parametrize(("chunk", "cycle"), [(3, [3, 4, 5]), (1, [4]), (2, [3, 4]), (4, [2, 3, 4, 5])])
def test_the_set_size_cycles_and_its_mean_is_at_most_b(chunk: int, cycle: list[int]) -> None:
    sizes = mean_b_sizes_over(chunk, 40)
    low, high = mean_b_sizes(4, chunk)
    assert (low, high) == (cycle[0], cycle[-1])
    tail = sizes[-4 * len(cycle) :]
    assert sorted(set(tail)) == cycle
    assert sum(tail) / len(tail) == pytest.approx(low + (chunk - 1) / 2) and sum(tail) / len(tail) <= 4
    assert sum(tail) / len(tail) == 4 or chunk % 2 == 0  # odd chunks: the mean is B exactly
    assert sizes[: low + 1] == list(range(low + 1))  # the first steps append one event each


def test_a_thread_met_mid_episode_is_topped_up_to_the_low_size() -> None:
    allocator = MeanBAllocator(RecentAllocator(), chunk=3)
    assert allocator.allocate(AllocationContext(trace_of(10), 4)).selected == (8, 9, 10)


def test_recent_collapses_to_the_newest_events_and_appends_between() -> None:
    allocator = MeanBAllocator(RecentAllocator(), chunk=3)
    trace = trace_of(0)
    seen = []
    for _ in range(10):
        seen.append(allocator.allocate(AllocationContext(trace, 4)).selected)
        trace.record(Action("click", x=0.5, y=0.5), "c", f"{trace.t:064x}", screenshot_size=SIZE)
    assert seen[6] == (4, 5, 6) and seen[7] == (4, 5, 6, 7) and seen[8] == (4, 5, 6, 7, 8)
    assert seen[9] == (7, 8, 9)


class Restore:
    """Proposes Recent-B with event 1 in place of the oldest, scoring event 1 ``score``."""

    name = "restore"
    uses_witness = False

    def __init__(self, score: float) -> None:
        self.score = score

    def allocate(self, ctx: AllocationContext):
        chosen = list(recent_b(ctx.t, ctx.budget))
        if len(chosen) > 1 and 1 not in chosen:
            chosen[0] = 1
        return make_allocation(
            chosen, t=ctx.t, budget=ctx.budget, allocator=self.name, scores={1: self.score}
        )


def conversation_pricer() -> PrefixPricer:
    return PrefixPricer(layout="conversation", image_rule=PatchImageRule(),
                        cache=hosted_cache_model("anthropic-claude"))  # fmt: skip


def test_a_priced_swap_is_refused_when_its_gain_is_under_its_cost() -> None:
    for score, expected in ((0.01, "held"), (5.0, "proposal")):
        allocator = MeanBAllocator(
            Restore(score), chunk=3, pricer=conversation_pricer(), exchange_rate=30000.0
        )
        trace = trace_of(0)
        infos = []
        for _ in range(8):
            infos.append(allocator.allocate(AllocationContext(trace, 4)))
            trace.record(Action("click", x=0.5, y=0.5), "c", f"{trace.t:064x}", screenshot_size=SIZE)
        offered = [a.info["mean_b"] for a in infos if "choice" in a.info["mean_b"]]
        assert offered, "event 1 left the set and was proposed again"
        first = offered[0]
        assert first["choice"] == expected
        assert (30000.0 * first["gain"] > first["cost"]) == (expected == "proposal")
        assert first["cost"] > 0


def test_an_unpriced_swap_is_always_taken_and_keeps_the_size() -> None:
    allocator = MeanBAllocator(Restore(0.0), chunk=3)
    trace = trace_of(0)
    for _ in range(9):
        out = allocator.allocate(AllocationContext(trace, 4))
        if "choice" in out.info["mean_b"]:
            assert out.info["mean_b"]["choice"] == "proposal" and 1 in out.selected
            assert len(out.selected) == out.info["mean_b"]["size"]
        trace.record(Action("click", x=0.5, y=0.5), "c", f"{trace.t:064x}", screenshot_size=SIZE)


def test_the_conversation_pricer_counts_from_the_first_change() -> None:
    trace = trace_of(6)
    pricer = conversation_pricer()
    assert pricer.invalidated(trace, (3, 4, 5, 6), (3, 4, 5, 6)) == 0
    early = pricer.invalidated(trace, (3, 4, 5, 6), (1, 4, 5, 6))  # from event 1 on
    late = pricer.invalidated(trace, (3, 4, 5, 6), (3, 4, 6))  # from event 5 on: one turn fewer
    assert early > late > 0
    assert early - late > pricer.turn_tokens(trace, 4)  # the turn of event 4 is rewritten only early
    assert pricer.invalidated(trace, (3, 4, 5, 6), (3, 4, 5)) > 0  # the newest dropped: the current after


def test_the_controller_accepts_the_contract_sizes_and_the_meter_counts(tmp_path, make_png) -> None:
    meter = PromptCostMeter(tokenize=chars, image_rule=RULE, cache=BreakpointCache(min_cacheable_tokens=0))
    controller = MemoryController(
        policy=EchoPolicy(), archive=LocalArchive(tmp_path / "a"), budget=4, prompt_cost=meter,
        allocator=MeanBAllocator(RecentAllocator(), chunk=3), render_options=CONVERSATION,
    )  # fmt: skip
    trace = Trace("open the settings", episode_id="ep")
    controller.observe(trace, make_png((1, 2, 3)))
    sizes = []
    for i in range(10):
        decision = controller.decide(trace)
        assert decision.fallback is None
        sizes.append(len(decision.allocation.selected))
        assert decision.to_record()["prompt_cost"][0] is not None
        controller.record(trace, decision, make_png((i * 40 % 256, 9, i)), response="click")
    controller.close()
    assert sizes == [0, 1, 2, 3, 4, 5, 3, 4, 5, 3]


def test_yaml_builds_the_mean_b_allocator_and_rejects_a_bad_chunk() -> None:
    config = parse_config({"allocation": {"allocator": "recent", "mean_b": {"chunk": 3},
                                          "priced": {"exchange_rate": 20000}},
                           "render": {"layout": "conversation"}})  # fmt: skip
    allocator = build_allocator(config.allocation)
    assert isinstance(allocator, MeanBAllocator) and allocator.chunk == 3 and allocator.pricer is not None
    assert allocator.exchange_rate == 20000
    plain = build_allocator(parse_config({"allocation": {"allocator": "recent", "mean_b": {}}}).allocation)
    assert isinstance(plain, MeanBAllocator) and plain.pricer is None and plain.chunk == 3
    with pytest.raises(Exception, match="chunk"):
        parse_config({"allocation": {"allocator": "recent", "mean_b": {"chunk": 0}}})
    with pytest.raises(AllocationError, match="chunk"):
        MeanBAllocator(RecentAllocator(), chunk=0)


def test_a_swap_keeps_the_events_the_proposal_keeps() -> None:
    """Base {16, 17, 18, 19}, proposal {10, 16, 18, 19}: 17 leaves (the proposal drops it), not 16."""
    assert MeanBAllocator._offered((16, 17, 18, 19), [10], {10, 16, 18, 19}) == (10, 16, 18, 19)
    assert MeanBAllocator._offered((16, 17, 18), [3, 10], {3, 10, 16, 18}) == (3, 10, 18)
    assert MeanBAllocator._offered((16, 17), [3, 5, 10], {3, 5, 10}) == (5, 10)


def test_the_decision_record_keeps_the_mean_b_facts(tmp_path, make_png) -> None:
    controller = MemoryController(policy=EchoPolicy(), archive=LocalArchive(tmp_path / "a"), budget=4,
                                  allocator=MeanBAllocator(RecentAllocator(), chunk=3), render_options=CONVERSATION)  # fmt: skip
    trace = Trace("open the settings", episode_id="ep")
    controller.observe(trace, make_png((1, 2, 3)))
    records = []
    for i in range(8):
        decision = controller.decide(trace)
        records.append(decision.to_record())
        controller.record(trace, decision, make_png((i * 40 % 256, 9, i)), response="click")
    controller.close()
    assert [r["mean_b"]["collapse"] for r in records] == [False] * 6 + [True, False]


def test_the_exact_b_priced_decision_refuses_the_conversation_layout_with_advice() -> None:
    from causalcache_memory.allocation import PricedAllocator

    allocator = PricedAllocator(RecentAllocator(), conversation_pricer())
    with pytest.raises(AllocationError, match=r"allocation\.mean_b"):
        allocator.use_layout("conversation")


def test_mean_b_is_refused_beside_explore() -> None:
    config = parse_config(
        {
            "allocation": {
                "allocator": "recent",
                "mean_b": {},
                "explore": {"allocator": "random", "share": 0.1},
            }
        }
    )
    with pytest.raises(AllocationError, match="mean_b cannot be combined"):
        build_allocator(config.allocation)
