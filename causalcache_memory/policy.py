"""The policy protocol: how the memory talks to a (frozen) GUI policy model.

Two operations (paper: Q(S) is the policy's mean target-token log-likelihood):

* ``generate(prompt)`` — greedy decoding; returns the verbatim response and the parsed action.
* ``score(prompts, targets)`` — teacher-forced mean log-likelihood of each target's tokens given its
  prompt, batched: selector labels and adapter training score many prompts that differ only in which
  history screenshots are present.

Implementations: the simulated policy of the synthetic world (``causalcache_lab.world``), and the VLM
runtimes in ``causalcache_memory.runtime`` (transformers, SGLang, OpenAI-compatible).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["Generation", "Policy"]


@dataclass(frozen=True, slots=True)
class Generation:
    """Result of one greedy generation.

    Attributes:
        response: the verbatim model output ``r``.
        action: the parsed action, or None when the response could not be parsed.
        parse_error: why parsing failed (None on success).
        latency_s: wall time of the model call in seconds.
        meta: small JSON-serializable extras (token counts, server name).
        cached_tokens: prompt tokens the server reused from its prefix (radix) cache for this call
            (SGLang ``meta_info.cached_tokens``); None when the runtime does not report it.
    """

    response: str
    action: Action | None
    parse_error: str | None = None
    latency_s: float = 0.0
    meta: dict[str, Any] = field(default_factory=dict)
    cached_tokens: int | None = None


@runtime_checkable
class Policy(Protocol):
    """A GUI policy model. ``name`` identifies it in logs and label files."""

    name: str

    def generate(self, prompt: BoundPrompt) -> Generation: ...

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]: ...
