"""Predicted prompt-cache reads and writes for the lab's runs (issue 50, item 5): a meter per memory.

The lab has no real tokenizer offline, so text is counted by :func:`stand_in_tokenize` (special tokens,
words, spaces and punctuation, hashed to ids): text counts are approximate, image counts exact (the
Qwen2.5-VL rule at each screenshot's recorded size), and equal text gives equal ids, so shared prefixes
are found as a real tokenizer would find them. :class:`MultiMeter` accounts each call once and steps one
cache simulator per model; the memory's decision records carry the first model's figures.
"""

from __future__ import annotations

import itertools
import re
import zlib
from typing import Any

from causalcache_memory.prompt_cost import (
    CacheSimulator,
    PatchImageRule,
    PromptCostMeter,
    account_prompt,
    hosted_cache_model,
    image_sizes_of,
)

__all__ = ["MultiMeter", "cache_models", "make_meter", "stand_in_tokenize"]

_PIECES = re.compile(r"<\|[^|]+\|>|\w+|\s+|[^\w\s]")
#: seconds between two metered calls (the TTLs of the hosted models are minutes)
CALL_SECONDS = 5.0


def stand_in_tokenize(text: str) -> list[int]:
    """A deterministic stand-in tokenizer: special tokens, words, spaces and punctuation, hashed."""
    return [zlib.crc32(p.encode()) % 150000 for p in _PIECES.findall(text)]


def cache_models() -> dict[str, Any]:
    """Anthropic-style breakpoints (hosted prices; anchors after the summaries, the last retained turn
    and the end, the same in both layouts) and OpenAI-style automatic prefix caching (hosted prices)."""
    anthropic = hosted_cache_model("anthropic-claude").model_copy(
        update={"anchors": ("summaries", "turn:-1", "end")}
    )
    return {"anthropic": anthropic, "automatic": hosted_cache_model("openai-gpt-4o")}


def make_meter(model: str = "anthropic") -> PromptCostMeter:
    """A :class:`PromptCostMeter` on one of :func:`cache_models` (stand-in tokenizer, simulated clock)."""
    clock = itertools.count(0.0, CALL_SECONDS)
    return PromptCostMeter(
        tokenize=stand_in_tokenize,
        image_rule=PatchImageRule(),
        cache=cache_models()[model],
        clock=lambda: float(next(clock)),
    )


class MultiMeter(PromptCostMeter):
    """Accounts each call once and steps one simulator per cache model; :meth:`take` returns the calls."""

    def __init__(self) -> None:
        self.models = cache_models()
        clock = itertools.count(0.0, CALL_SECONDS)
        super().__init__(
            tokenize=stand_in_tokenize,
            image_rule=PatchImageRule(),
            cache=self.models["anthropic"],
            clock=lambda: float(next(clock)),
        )
        self.sims: dict[tuple[str, str], CacheSimulator] = {}
        self.calls: list[dict[str, Any]] = []

    def observe(self, trace: Any, prompt: Any) -> Any:
        tokens = account_prompt(
            prompt, tokenize=self.tokenize, image_rule=self.image_rule, image_sizes=image_sizes_of(trace)
        )
        now = self.clock()
        row: dict[str, Any] = {
            "t": trace.t,
            "images": len(prompt.images),
            "retained": len(prompt.allocation.selected),
        }
        for name, model in self.models.items():
            sim = self.sims.setdefault((trace.episode_id, name), CacheSimulator(model))
            row[name] = sim.step(tokens, now)
        self.calls.append(row)
        return row["anthropic"]

    def take(self) -> list[dict[str, Any]]:
        """The calls since the last take (episodes run one after another on one meter)."""
        calls, self.calls = self.calls, []
        return calls
