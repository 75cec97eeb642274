"""Provider prompt-cache models: what each step of an episode writes to and reads from the cache.

Every model maps the consecutive prompts of an episode (:class:`~causalcache_memory.prompt_cost.accounting.PromptTokens`,
one per call) to one :class:`StepCacheCost` per call, with ``prompt = read + write + uncached`` tokens and

    cost = (uncached * input_price + write * write_price + read * read_price) / 1e6   (prices per million)

* :class:`BreakpointCache` (``kind: breakpoints``, Anthropic-style explicit ``cache_control``): up to four
  breakpoints at part anchors (``system``, ``summaries``, ``turn:-1`` .. the last retained turns, ``end``).
  An entry is written at each breakpoint; a call reads the longest earlier entry that is a prefix of it
  (still alive: ``ttl_seconds`` since it was last written or read), writes from there to its last
  breakpoint, and sends the rest uncached. Prefixes shorter than ``min_cacheable_tokens`` are not cached.
* :class:`AutomaticPrefixCache` (``kind: automatic``, OpenAI-style): no breakpoints; a call reads the longest
  prefix shared with an earlier live call, counted only from ``min_cacheable_tokens`` on and rounded down
  to ``block_tokens``; writing costs the input price (``write_price`` defaults to it).
* :class:`BlockPrefixCache` (``kind: block``, SGLang's radix cache with ``block_tokens = 1``, vLLM's prefix
  cache with its block size, 16 by default): reads the shared prefix rounded down to whole blocks, and
  never the last token (``recompute_last_token``: the server computes it to start decoding); capacity
  and eviction are not modelled (an unbounded cache; ``ttl_seconds`` bounds it in time if given).

Times: :func:`simulate_cache` takes each call's time in seconds (default ``step_seconds`` apart). Two
calls of one step (pass 1 and pass 2) are two prompts in the sequence.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, field_validator

from causalcache_memory.errors import ConfigError
from causalcache_memory.prompt_cost.accounting import PromptTokens, shared_prefix
from causalcache_memory.prompt_cost.image_tokens import hosted_table

__all__ = [
    "AutomaticPrefixCache",
    "BlockPrefixCache",
    "BreakpointCache",
    "CacheModel",
    "CacheSimulator",
    "StepCacheCost",
    "cache_model_from_dict",
    "hosted_cache_model",
    "simulate_cache",
]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    input_price: float = Field(0.0, ge=0, description="USD per million uncached input tokens")
    read_price: float = Field(0.0, ge=0, description="USD per million tokens read from the cache")
    write_price: float | None = Field(None, ge=0, description="USD per million tokens written (None: input)")
    ttl_seconds: float | None = Field(None, gt=0, description="lifetime of an entry since its last use")

    @property
    def write(self) -> float:
        return self.input_price if self.write_price is None else self.write_price


class BreakpointCache(_Model):
    kind: Literal["breakpoints"] = "breakpoints"
    min_cacheable_tokens: int = Field(1024, ge=0)
    anchors: tuple[str, ...] = ("summaries", "end")

    @field_validator("anchors")
    @classmethod
    def _anchors(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not 1 <= len(value) <= 4:
            raise ValueError(f"anchors={list(value)}: give 1 to 4 breakpoints (the provider's limit is 4)")
        for a in value:
            if a not in ("system", "summaries", "end") and not (
                a.startswith("turn:-") and a[6:].isdigit() and int(a[6:]) >= 1
            ):
                raise ValueError(f"anchor {a!r} is not system, summaries, end or turn:-k (k >= 1)")
        return value

    def breakpoints(self, prompt: PromptTokens) -> list[int]:
        """Token positions of this call's breakpoints (ascending, duplicates and zero removed)."""
        turns = [c.part for c in prompt.chunks if c.part.startswith("screen:")]
        turns = list(dict.fromkeys(turns))
        out = set()
        for a in self.anchors:
            if a == "end":
                out.add(prompt.total - prompt.part_total("generation"))
            elif a.startswith("turn:-"):
                k = int(a[6:])
                if k <= len(turns):
                    out.add(prompt.end_of(turns[-k]))
            else:
                out.add(prompt.end_of(a))
        return sorted(p for p in out if p >= max(1, self.min_cacheable_tokens))


class AutomaticPrefixCache(_Model):
    kind: Literal["automatic"] = "automatic"
    min_cacheable_tokens: int = Field(1024, ge=0)
    block_tokens: int = Field(128, ge=1)


class BlockPrefixCache(_Model):
    kind: Literal["block"] = "block"
    block_tokens: int = Field(1, ge=1, description="1: SGLang radix; 16: vLLM's default block")
    recompute_last_token: bool = Field(
        True, description="a fully cached prompt still computes its last token (SGLang and vLLM do)"
    )


CacheModel = Annotated[BreakpointCache | AutomaticPrefixCache | BlockPrefixCache, Field(discriminator="kind")]
_ADAPTER = TypeAdapter(CacheModel)


def hosted_cache_model(model: str) -> BreakpointCache | AutomaticPrefixCache | BlockPrefixCache:
    """The cache model of one hosted model of ``assets/prompt_cost/hosted_models.yaml``, by name."""
    table = {name: entry["cache"] for name, entry in hosted_table().items() if "cache" in entry}
    if model not in table:
        raise ConfigError(
            f"model={model!r} has no cache entry in the hosted-model table; use one of "
            f"{', '.join(sorted(table))} or build a BreakpointCache/AutomaticPrefixCache/BlockPrefixCache"
        )
    return cache_model_from_dict(table[model])


def cache_model_from_dict(data: object) -> BreakpointCache | AutomaticPrefixCache | BlockPrefixCache:
    """A cache model from a config dictionary (``kind`` selects it); errors name the field."""
    try:
        return _ADAPTER.validate_python(data)
    except Exception as exc:  # pydantic's ValidationError names the field and the value
        raise ConfigError(f"invalid prompt-cache model: {exc}") from exc


@dataclass(frozen=True, slots=True)
class StepCacheCost:
    """One call's cache accounting: ``prompt_tokens = read + write + uncached``."""

    prompt_tokens: int
    shared_prefix_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    uncached_tokens: int
    cost: float

    def to_dict(self) -> dict[str, float | int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "shared_prefix_tokens": self.shared_prefix_tokens,
            "cache_read_tokens": self.cache_read_tokens,
            "cache_write_tokens": self.cache_write_tokens,
            "uncached_tokens": self.uncached_tokens,
            "cost": self.cost,
        }


@dataclass
class _Entry:
    prompt: PromptTokens
    length: int  # tokens of the prompt this entry caches
    used: float


def _alive(entries: list[_Entry], now: float, ttl: float | None) -> list[_Entry]:
    return [e for e in entries if ttl is None or now - e.used <= ttl]


def _round(tokens: int, minimum: int, block: int) -> int:
    if tokens < max(minimum, 1):
        return 0
    return minimum + (tokens - minimum) // block * block if minimum else tokens // block * block


class CacheSimulator:
    """One cache's state over an episode's calls: :meth:`step` each prompt in order (module docstring)."""

    def __init__(self, model: BreakpointCache | AutomaticPrefixCache | BlockPrefixCache) -> None:
        self.model = model
        self._entries: list[_Entry] = []
        self._previous: PromptTokens | None = None

    def step(self, prompt: PromptTokens, now: float) -> StepCacheCost:
        """The cache accounting of the call sending ``prompt`` at time ``now`` (seconds); updates the cache."""
        model = self.model
        entries = self._entries = _alive(self._entries, now, model.ttl_seconds)
        total = prompt.total
        previous = self._previous
        shared = shared_prefix(previous, prompt) if previous is not None else 0
        hits = [(min(shared_prefix(e.prompt, prompt), e.length), e) for e in entries]
        if isinstance(model, BreakpointCache):
            marks = model.breakpoints(prompt)
            usable = [(e.length, e) for m, e in hits if m == e.length]  # an entry hits only whole
            read = max((n for n, _ in usable), default=0)
            write = max(0, (marks[-1] if marks else 0) - read)
            for n, e in usable:
                if n == read and read:
                    e.used = now
            entries += [_Entry(prompt, m, now) for m in marks if m > read]
        else:
            if isinstance(model, AutomaticPrefixCache):
                minimum, block = model.min_cacheable_tokens, model.block_tokens
            else:
                minimum, block = 0, model.block_tokens
            best = max((m for m, _ in hits), default=0)
            limit = total - 1 if isinstance(model, BlockPrefixCache) and model.recompute_last_token else total
            read = _round(min(best, max(limit, 0)), minimum, block)
            for m, e in hits:
                if m >= read and read:
                    e.used = now
            write = total - read
            entries.append(_Entry(prompt, total, now))
        uncached = total - read - write
        cost = (uncached * model.input_price + write * model.write + read * model.read_price) / 1e6
        self._previous = prompt
        return StepCacheCost(total, shared, read, write, uncached, cost)


def simulate_cache(
    prompts: Sequence[PromptTokens],
    model: BreakpointCache | AutomaticPrefixCache | BlockPrefixCache,
    *,
    times: Sequence[float] | None = None,
    step_seconds: float = 10.0,
) -> list[StepCacheCost]:
    """Each call's cache-read, cache-write and uncached tokens and cost under ``model`` (module docstring)."""
    if times is not None and len(times) != len(prompts):
        raise ConfigError(f"times has {len(times)} entries for {len(prompts)} prompts; give one per prompt")
    clock = list(times) if times is not None else [i * step_seconds for i in range(len(prompts))]
    simulator = CacheSimulator(model)
    return [simulator.step(prompt, now) for prompt, now in zip(prompts, clock, strict=True)]
