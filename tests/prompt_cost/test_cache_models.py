"""Provider cache models and image-token rules on hand-computed cases (no tokenizer, no torch)."""

from __future__ import annotations

import pytest

from causalcache_memory.errors import ConfigError
from causalcache_memory.prompt_cost import (
    AreaImageRule,
    AutomaticPrefixCache,
    BlockPrefixCache,
    BreakpointCache,
    Chunk,
    PatchImageRule,
    PromptTokens,
    TileImageRule,
    cache_model_from_dict,
    hosted_cache_model,
    hosted_image_rule,
    shared_prefix,
    simulate_cache,
)


def text(part: str, ids: range | list[int]) -> Chunk:
    return Chunk(part, len(ids), ids=tuple(ids))


def image(part: str, sha: str, n: int = 100) -> Chunk:
    return Chunk(part, n, image=sha)


def prompt(*chunks: Chunk) -> PromptTokens:
    return PromptTokens(tuple(chunks))


# step 1: system 10, summaries 20, retained screen a (100), current text 5 + screen c (100), generation 3
P1 = prompt(
    text("system", range(10)),
    text("summaries", range(100, 120)),
    image("screen:1", "a"),
    text("current", range(200, 205)),
    image("current", "c"),
    text("generation", [7, 8, 9]),
)
# step 2: one more summary line (the first 20 ids unchanged), the window slid to screen b
P2 = prompt(
    text("system", range(10)),
    text("summaries", range(100, 125)),
    image("screen:2", "b"),
    text("current", range(200, 205)),
    image("current", "d"),
    text("generation", [7, 8, 9]),
)


def test_shared_prefix_stops_inside_the_first_differing_chunk() -> None:
    assert (P1.total, P2.total) == (238, 243)
    assert shared_prefix(P1, P2) == 30
    assert shared_prefix(P2, P2) == 243
    other_image = prompt(*P1.chunks[:2], image("screen:1", "z"), *P1.chunks[3:])
    assert shared_prefix(P1, other_image) == 30  # a different screenshot shares no token


def test_radix_and_block_caches_round_down_to_blocks() -> None:
    radix = simulate_cache([P1, P2, P2], BlockPrefixCache(input_price=1.0))
    assert [(s.cache_read_tokens, s.cache_write_tokens) for s in radix] == [(0, 238), (30, 213), (242, 1)]
    assert radix[1].shared_prefix_tokens == 30
    assert radix[1].cost == pytest.approx(213 / 1e6)
    whole = simulate_cache([P2, P2], BlockPrefixCache(recompute_last_token=False))
    assert whole[1].cache_read_tokens == 243
    vllm = simulate_cache([P1, P2], BlockPrefixCache(block_tokens=16))
    assert vllm[1].cache_read_tokens == 16 and vllm[1].cache_write_tokens == 227


def test_automatic_prefix_cache_counts_from_the_minimum_in_blocks() -> None:
    model = AutomaticPrefixCache(input_price=2.0, read_price=1.0, min_cacheable_tokens=16, block_tokens=8)
    steps = simulate_cache([P1, P2], model)
    assert steps[1].cache_read_tokens == 24  # 16 + floor((30 - 16) / 8) * 8
    assert steps[1].cache_write_tokens == 243 - 24
    assert steps[1].cost == pytest.approx((219 * 2.0 + 24 * 1.0) / 1e6)
    too_short = simulate_cache([P1, P2], AutomaticPrefixCache(min_cacheable_tokens=1024))
    assert too_short[1].cache_read_tokens == 0


def test_breakpoints_write_up_to_the_last_and_read_whole_entries() -> None:
    model = BreakpointCache(input_price=3.0, write_price=3.75, read_price=0.3, min_cacheable_tokens=0)
    assert model.breakpoints(P1) == [30, 235]
    s1, s2 = simulate_cache([P1, P2], model)
    assert (s1.cache_read_tokens, s1.cache_write_tokens, s1.uncached_tokens) == (0, 235, 3)
    assert (s2.cache_read_tokens, s2.cache_write_tokens, s2.uncached_tokens) == (30, 210, 3)
    assert s2.cost == pytest.approx((3 * 3.0 + 210 * 3.75 + 30 * 0.3) / 1e6)
    # an entry expires ttl_seconds after its last use
    late = simulate_cache([P1, P2], model.model_copy(update={"ttl_seconds": 300.0}), times=[0.0, 301.0])
    assert late[1].cache_read_tokens == 0
    # prefixes shorter than the provider's minimum get no breakpoint
    short = BreakpointCache(min_cacheable_tokens=32)
    assert short.breakpoints(P1) == [235]
    assert simulate_cache([P1, P2], short)[1].cache_read_tokens == 0


def test_breakpoint_on_the_last_retained_turn() -> None:
    model = BreakpointCache(min_cacheable_tokens=0, anchors=("system", "turn:-1", "end"))
    assert model.breakpoints(P1) == [10, 130, 235]
    assert BreakpointCache(anchors=("turn:-2",), min_cacheable_tokens=0).breakpoints(P1) == []


def test_cache_config_is_checked_by_field() -> None:
    with pytest.raises(ConfigError, match="anchors"):
        cache_model_from_dict(
            {"kind": "breakpoints", "anchors": ["system", "summaries", "end", "turn:-1", "turn:-2"]}
        )
    with pytest.raises(ConfigError, match="turn:-0"):
        cache_model_from_dict({"kind": "breakpoints", "anchors": ["turn:-0"]})
    with pytest.raises(ConfigError, match="block_size"):
        cache_model_from_dict({"kind": "block", "block_size": 16})
    assert cache_model_from_dict({"kind": "block", "block_tokens": 16}) == BlockPrefixCache(block_tokens=16)
    with pytest.raises(ConfigError, match="times has 1"):
        simulate_cache([P1, P2], BlockPrefixCache(), times=[0.0])


def test_qwen_rule_by_hand() -> None:
    q25 = PatchImageRule(min_pixels=3136, max_pixels=12845056)
    assert q25.resized(1920, 1080) == (1932, 1092) and q25.tokens(1920, 1080) == 39 * 69
    q3 = PatchImageRule.from_processor_config(
        {"patch_size": 16, "merge_size": 2, "size": {"shortest_edge": 65536, "longest_edge": 16777216}}
    )
    assert q3.tokens(1920, 1080) == 34 * 60
    assert q25.resized(30, 20) == (84, 56)  # below min_pixels: scaled up, ceil to 28
    tiny = PatchImageRule(min_pixels=784, max_pixels=18816)
    assert tiny.resized(1280, 800) == (168, 84)  # above max_pixels: scaled down, floor to 28
    with pytest.raises(ConfigError, match="min_pixels"):
        PatchImageRule.from_processor_config({"patch_size": 14})


def test_hosted_rules_by_hand() -> None:
    area = AreaImageRule()
    assert area.tokens(200, 100) == 27  # ceil(20000 / 750)
    assert area.tokens(1920, 1080) == 1532  # scaled to 1429 x 804 by the 1.15 MP limit
    assert TileImageRule().tokens(1920, 1080) == 85 + 170 * 6  # 1365 x 768: 3 x 2 tiles
    assert TileImageRule().tokens(2048, 4096) == 1105  # OpenAI's worked example
    assert hosted_image_rule("qwen2.5-vl").tokens(1920, 1080) == 2691
    assert isinstance(hosted_cache_model("anthropic-claude"), BreakpointCache)
    assert isinstance(hosted_cache_model("openai-gpt-4o"), AutomaticPrefixCache)
    with pytest.raises(ConfigError, match="gpt-9"):
        hosted_image_rule("gpt-9")
