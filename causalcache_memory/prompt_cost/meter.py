"""Per-call prompt-cache accounting for a running memory (off unless a :class:`PromptCostMeter` is given).

Pass ``prompt_cost=PromptCostMeter(...)`` to :class:`~causalcache_memory.controller.MemoryController`
(or ``build_controller(config, prompt_cost=...)``): every model call of a decision (pass 1, then pass 2
when it runs) is counted with :func:`~causalcache_memory.prompt_cost.accounting.account_prompt` and fed to
one :class:`~causalcache_memory.prompt_cost.cache_models.CacheSimulator` per thread (episode id), and the
decision record carries ``prompt_cost``: one dictionary per call with ``prompt_tokens``,
``shared_prefix_tokens``, ``cache_read_tokens``, ``cache_write_tokens``, ``uncached_tokens``, ``cost``.
Without a meter nothing is counted and the record has no such key.

This is a *prediction* from the configured cache model, not the provider's bill; a runtime that reports
reuse (SGLang's ``cached_tokens``) still writes it beside it in the record.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence

from causalcache_memory.prompt_cost.accounting import ChatFraming, account_prompt, image_sizes_of
from causalcache_memory.prompt_cost.cache_models import (
    AutomaticPrefixCache,
    BlockPrefixCache,
    BreakpointCache,
    CacheSimulator,
    StepCacheCost,
)
from causalcache_memory.prompt_cost.image_tokens import AreaImageRule, PatchImageRule, TileImageRule
from causalcache_memory.render.messages import RenderedPrompt
from causalcache_memory.trace import Trace

__all__ = ["PromptCostMeter"]


class PromptCostMeter:
    """Counts each model call's prompt and predicts what the provider's cache makes of it.

    Args:
        tokenize: ``text -> ids`` (:func:`~causalcache_memory.prompt_cost.accounting.hf_tokenize`).
        image_rule: the model family's image-token rule.
        cache: the provider's cache model.
        framing: the chat framing (default: Qwen-VL ChatML).
        clock: seconds now (``time.monotonic`` by default; TTLs are measured on it).
        max_threads: threads whose cache state is kept (least recently used dropped first).
    """

    def __init__(
        self,
        *,
        tokenize: Callable[[str], Sequence[int]],
        image_rule: PatchImageRule | AreaImageRule | TileImageRule,
        cache: BreakpointCache | AutomaticPrefixCache | BlockPrefixCache,
        framing: ChatFraming | None = None,
        clock: Callable[[], float] = time.monotonic,
        max_threads: int = 1024,
    ) -> None:
        self.tokenize = tokenize
        self.image_rule = image_rule
        self.cache = cache
        self.framing = framing or ChatFraming()
        self.clock = clock
        self.max_threads = max_threads
        self._threads: OrderedDict[str, CacheSimulator] = OrderedDict()
        self._lock = threading.Lock()

    def observe(self, trace: Trace, prompt: RenderedPrompt) -> StepCacheCost:
        """Account the call sending ``prompt`` (rendered from ``trace``) on its thread's cache."""
        tokens = account_prompt(
            prompt,
            tokenize=self.tokenize,
            image_rule=self.image_rule,
            image_sizes=image_sizes_of(trace),
            framing=self.framing,
        )
        with self._lock:
            simulator = self._threads.pop(trace.episode_id, None) or CacheSimulator(self.cache)
            self._threads[trace.episode_id] = simulator
            while len(self._threads) > self.max_threads:
                self._threads.popitem(last=False)
            return simulator.step(tokens, self.clock())
