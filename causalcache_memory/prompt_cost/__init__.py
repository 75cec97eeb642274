"""What a rendered prompt costs in tokens, and what a provider's prompt cache makes of consecutive prompts.

* :mod:`~causalcache_memory.prompt_cost.image_tokens`: image-token rules per model family (config);
* :mod:`~causalcache_memory.prompt_cost.accounting`: exact per-part token counts and the shared prefix;
* :mod:`~causalcache_memory.prompt_cost.cache_models`: Anthropic-style breakpoints, OpenAI-style automatic
  prefix caching, SGLang/vLLM radix and block caches, priced per step.

Light: pydantic and PyYAML only; tokenizers are passed in. See docs/PROMPT_COST.md.
"""

from causalcache_memory.prompt_cost.accounting import (
    ChatFraming,
    Chunk,
    PromptTokens,
    account_prompt,
    hf_tokenize,
    image_sizes_of,
    shared_prefix,
)
from causalcache_memory.prompt_cost.cache_models import (
    AutomaticPrefixCache,
    BlockPrefixCache,
    BreakpointCache,
    CacheModel,
    CacheSimulator,
    StepCacheCost,
    cache_model_from_dict,
    hosted_cache_model,
    simulate_cache,
)
from causalcache_memory.prompt_cost.image_tokens import (
    AreaImageRule,
    ImageRule,
    PatchImageRule,
    TileImageRule,
    hosted_image_rule,
    hosted_image_rules,
)
from causalcache_memory.prompt_cost.meter import PromptCostMeter

__all__ = [
    "AreaImageRule",
    "AutomaticPrefixCache",
    "BlockPrefixCache",
    "BreakpointCache",
    "CacheModel",
    "CacheSimulator",
    "ChatFraming",
    "Chunk",
    "ImageRule",
    "PatchImageRule",
    "PromptCostMeter",
    "PromptTokens",
    "StepCacheCost",
    "TileImageRule",
    "account_prompt",
    "cache_model_from_dict",
    "hf_tokenize",
    "hosted_cache_model",
    "hosted_image_rule",
    "hosted_image_rules",
    "image_sizes_of",
    "shared_prefix",
    "simulate_cache",
]
