"""The decision record carries predicted cache reads/writes per model call when a meter is configured."""

from __future__ import annotations

import pytest

from causalcache_memory import Action, Generation, Trace, make_allocation
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.prompt_cost import (
    BlockPrefixCache,
    BreakpointCache,
    PatchImageRule,
    PromptCostMeter,
    account_prompt,
    image_sizes_of,
    shared_prefix,
)
from causalcache_memory.render import render_prompt


def chars(text: str) -> list[int]:
    return [ord(c) for c in text]


class EchoPolicy:
    name = "echo"

    def generate(self, prompt) -> Generation:
        return Generation(response="click", action=Action("click", x=0.5, y=0.5))

    def score(self, prompts, targets):  # pragma: no cover - not used here
        return [0.0 for _ in prompts]


class SwapOldest:
    """Swaps event 1 in for the oldest recent event (so pass 2 runs) whenever it can."""

    name = "swap"
    uses_witness = True

    def allocate(self, ctx: AllocationContext):
        recent = list(RecentAllocator().allocate(ctx).selected)
        if recent and 1 not in recent:
            recent[0] = 1
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name)


RULE = PatchImageRule(min_pixels=784, max_pixels=28 * 28 * 24)


def run(tmp_path, make_png, allocator, meter, steps=6):
    archive = LocalArchive(tmp_path / "a")
    controller = MemoryController(
        policy=EchoPolicy(), archive=archive, allocator=allocator, budget=2, prompt_cost=meter
    )
    trace = Trace("open the settings", episode_id="ep")
    controller.observe(trace, make_png((1, 2, 3)))
    records, prompts, sizes = [], [], {}
    for i in range(steps):
        decision = controller.decide(trace)
        records.append(decision.to_record())
        prompts.append(render_prompt(trace, decision.allocation))
        sizes.update(image_sizes_of(trace))
        controller.record(trace, decision, make_png((i * 40 % 256, 9, i)), response="click")
    controller.close()
    return sizes, records, prompts


def test_no_meter_no_key(tmp_path, make_png) -> None:
    _, records, _ = run(tmp_path, make_png, RecentAllocator(), None, steps=2)
    assert all("prompt_cost" not in r for r in records)


def test_radix_reads_the_prefix_shared_with_the_previous_call(tmp_path, make_png) -> None:
    meter = PromptCostMeter(tokenize=chars, image_rule=RULE, cache=BlockPrefixCache(input_price=1.0))
    sizes, records, prompts = run(tmp_path, make_png, RecentAllocator(), meter)
    costs = [r["prompt_cost"] for r in records]
    assert all(len(c) == 1 for c in costs)  # one model call per step (no witness)
    counted = [account_prompt(p, tokenize=chars, image_rule=RULE, image_sizes=sizes) for p in prompts]
    for t in range(1, len(costs)):
        step = costs[t][0]
        assert step["prompt_tokens"] == counted[t].total
        assert step["shared_prefix_tokens"] == shared_prefix(counted[t - 1], counted[t])
        assert step["cache_read_tokens"] >= step["shared_prefix_tokens"]
        assert step["cache_read_tokens"] + step["cache_write_tokens"] == step["prompt_tokens"]
        assert step["cost"] == pytest.approx(step["cache_write_tokens"] / 1e6)
    # the summaries grow at their end, so the system message and the old summary lines are read again
    assert costs[-1][0]["cache_read_tokens"] > counted[-1].part_total("system")


def test_both_passes_are_counted_and_pass_two_reads_pass_one(tmp_path, make_png) -> None:
    cache = BreakpointCache(min_cacheable_tokens=0, anchors=("summaries", "end"))
    meter = PromptCostMeter(tokenize=chars, image_rule=RULE, cache=cache, clock=lambda: 0.0)
    _, records, _ = run(tmp_path, make_png, SwapOldest(), meter)
    swapped = [r for r in records if r["second_pass"]]
    assert swapped, "the allocator swaps event 1 in once t > B + 1"
    for r in swapped:
        first, second = r["prompt_cost"]
        # pass 2 differs from pass 1 in the allocation only: it reads pass 1's summaries breakpoint
        assert 0 < second["cache_read_tokens"] <= second["shared_prefix_tokens"]
        # the "end" breakpoint sits before the generation prompt, which is sent uncached
        assert second["uncached_tokens"] == len("<|im_start|>assistant\n")
        assert second["cache_write_tokens"] == second["prompt_tokens"] - 22 - second["cache_read_tokens"]
        assert (
            first["cache_read_tokens"] + first["cache_write_tokens"] + first["uncached_tokens"]
            == first["prompt_tokens"]
        )


def test_a_meter_that_cannot_count_warns_and_never_fails_the_step(tmp_path, make_png) -> None:
    from causalcache_memory.errors import CausalCacheWarning

    def broken(text: str) -> list[int]:
        raise ValueError("tokenizer unavailable")

    meter = PromptCostMeter(tokenize=broken, image_rule=RULE, cache=BlockPrefixCache())
    with pytest.warns(CausalCacheWarning, match="prompt cost not counted for step 1 of ep: ValueError"):
        _, records, _ = run(tmp_path, make_png, RecentAllocator(), meter, steps=2)
    assert [r["prompt_cost"] for r in records] == [[None], [None]]
    assert all(r["action"] is not None for r in records)
