"""The radix cache model predicts the ``cached_tokens`` a radix-cache server reports (issue 50, the check
without a GPU: the in-process fake SGLang server, whose cache is the longest token prefix shared with an
earlier prompt and never the last token, as SGLang's).

A recorded episode runs through the SGLang client under two-pass decisions with a swapping allocator, so
the record holds pass 1 and pass 2 of some steps; every call's predicted ``cache_read_tokens`` must equal
the server's ``cached_tokens``.
"""

from __future__ import annotations

import pytest
from loopback import SGLangLoopback

from causalcache_memory import Trace, make_allocation
from causalcache_memory.allocation import AllocationContext, RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.controller import MemoryController
from causalcache_memory.prompt_cost import BlockPrefixCache, PatchImageRule, PromptCostMeter
from causalcache_memory.runtime.sglang_client import SGLangPolicy


class SwapFirst:
    """Puts event 1 in the oldest recent slot whenever it is not there (pass 2 runs on those steps)."""

    name = "swap-first"
    uses_witness = True

    def allocate(self, ctx: AllocationContext):
        recent = list(RecentAllocator().allocate(ctx).selected)
        if recent and 1 not in recent and ctx.t % 2 == 0:
            recent[0] = 1
        return make_allocation(recent, t=ctx.t, budget=ctx.budget, allocator=self.name)


@pytest.mark.parametrize("allocator", [RecentAllocator(), SwapFirst()], ids=["recent", "swap"])
def test_predicted_reads_equal_the_servers_cached_tokens(tmp_path, make_png, allocator) -> None:
    with SGLangLoopback() as server:
        server.role_aware = (
            False  # stock SGLang: an image is keyed by its content alone, as the model keys it
        )
        model = server.model
        meter = PromptCostMeter(
            tokenize=lambda text: model.tokenize(text, []),
            # 64 x 48 screenshots become 56 x 56 pixels, 2 x 2 merged patches: the fake's 4 tokens an image
            image_rule=PatchImageRule(min_pixels=3136, max_pixels=3136),
            cache=BlockPrefixCache(),
        )
        policy = SGLangPolicy(server.url, timeout_s=5, max_retries=0, check_images=False)
        controller = MemoryController(
            policy=policy,
            archive=LocalArchive(tmp_path / "a"),
            allocator=allocator,
            budget=2,
            prompt_cost=meter,
        )
        assert model.image_tokens == 4
        trace = Trace("open the settings and enable dark mode", episode_id="radix")
        controller.observe(trace, make_png((1, 2, 3)))
        calls = 0
        for i in range(7):
            record = controller.decide(trace).to_record()
            predicted = [c["cache_read_tokens"] for c in record["prompt_cost"]]
            assert predicted == record["cached_tokens"], f"step {record['t']}"
            assert [c["prompt_tokens"] for c in record["prompt_cost"]] == record["prompt_tokens"]
            calls += len(predicted)
            controller.record(trace, None, make_png((i * 30 % 256, 7, i)), response=f"click {i}")
        controller.close()
        policy.close()
    assert calls > 7 if isinstance(allocator, SwapFirst) else calls == 7
