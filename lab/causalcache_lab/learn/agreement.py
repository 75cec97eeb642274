"""Agreement labels: selector utilities from any model that can only *act* (hosted APIs, chat models).

Teacher-forced labels need a log-likelihood of the recorded response; a black-box policy has none. For an
allocation ``S`` of a decision state the agreement utility is

    Q_agree(S) = (1 / k) · Σ_{i=1..k} [ a^(i) ≡ a_t ],   a^(i) ~ policy(· | prompt(S), temperature)

the share of ``k`` sampled actions that are equivalent to the recorded action ``a_t`` under full-action
equivalence (:func:`~causalcache_memory.actions.equivalence.actions_equivalent`: same type, pointers within
the platform radius, same keys / text). An unparsable sample counts as a disagreement.

:class:`AgreementScorer` has the :class:`~causalcache_memory.policy.Policy` shape (``score(prompts,
targets)`` returns ``Q_agree``), so :func:`~causalcache_lab.selector.labels.run_labelling` labels with
it unchanged: the anchor is ``Q_agree(Recent-B)``, every swap is scored against it exactly as today's
labels, and training consumes the records unchanged. Targets are the recorded action as JSON
(``labels.target: action_json``).

Samplers (one call = one sampled action):

* :class:`ChatModelSampler` -- a LangChain ``BaseChatModel`` (``temperature`` bound per call), or the
  agent's ``ChatModelPolicy`` wrapper of one (its ``coords``, ``system`` and ``parse`` kept: a model that
  writes the 0-1000 grid on a screen wider than 1000 pixels must say so, as it did live);
* :class:`OpenAISampler` -- an OpenAI-compatible endpoint through
  :class:`~causalcache_memory.runtime.openai_client.OpenAIPolicy` (``temperature`` in the request);
* :class:`PolicySampler` -- any policies' greedy ``generate``, rotating over them (e.g. the synthetic
  world's simulated policy under ``k`` seeds: its randomness is its seed, so ``temperature`` is None).

:func:`make_sampler` picks one for an object (the first that fits, in that order of checks).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from causalcache_memory.actions.equivalence import actions_equivalent
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_memory.policy import Generation
    from causalcache_memory.render.messages import BoundPrompt

__all__ = [
    "AgreementScorer",
    "ChatModelSampler",
    "OpenAISampler",
    "PolicySampler",
    "Sampler",
    "make_sampler",
]

logger = logging.getLogger("causalcache_lab.learn.agreement")


class Sampler(Protocol):
    """One sampled action per call; ``index`` counts the samples of one prompt (0..k-1)."""

    name: str

    def sample(self, prompt: BoundPrompt, *, temperature: float | None, index: int) -> Generation: ...


class ChatModelSampler:
    """Samples a LangChain chat model (``model.bind(temperature=...)`` per call; needs langchain-core)."""

    def __init__(
        self, model: Any, *, coords: str = "auto", system: str | None = None, parse: Any = None
    ) -> None:
        from causalcache_memory._optional import require

        require("langchain_core", purpose="agreement labels from a LangChain chat model")
        self.model = model
        self.coords, self.system, self.parse = coords, system, parse
        self.name = str(
            getattr(model, "model_name", None) or getattr(model, "model", None) or type(model).__name__
        )

    def sample(self, prompt: BoundPrompt, *, temperature: float | None, index: int) -> Generation:
        from causalcache_memory.integrations.langgraph.policies import ChatModelPolicy

        model = self.model
        if temperature is not None and hasattr(model, "bind"):
            model = model.bind(temperature=temperature)
        policy = ChatModelPolicy(
            model, coords=self.coords, system=self.system, name=self.name, parse=self.parse
        )  # type: ignore[arg-type]
        return policy.generate(prompt)


class OpenAISampler:
    """Samples an OpenAI-compatible chat endpoint (one request per sample, ``temperature`` in it)."""

    def __init__(self, policy: Any) -> None:
        self.policy = policy
        self.name = str(policy.name)

    def sample(self, prompt: BoundPrompt, *, temperature: float | None, index: int) -> Generation:
        return self.policy.generate(prompt, temperature=0.0 if temperature is None else temperature)

    def close(self) -> None:
        self.policy.close()  # the endpoint's connection pool


class PolicySampler:
    """Greedy ``generate`` of ``policies[index % len(policies)]`` (black box: only the action is read)."""

    def __init__(self, policies: Sequence[Any], *, name: str | None = None) -> None:
        if not policies:
            raise ConfigError("PolicySampler needs at least one policy")
        self.policies = list(policies)
        self.name = name or str(getattr(self.policies[0], "name", type(self.policies[0]).__name__))

    def sample(self, prompt: BoundPrompt, *, temperature: float | None, index: int) -> Generation:
        return self.policies[index % len(self.policies)].generate(prompt)


def make_sampler(obj: Any) -> Sampler:
    """A sampler for ``obj``: a sampler, an ``OpenAIPolicy``, a ``ChatModelPolicy``, policies, or a LangChain
    chat model."""
    if callable(getattr(obj, "sample", None)):
        return obj  # type: ignore[no-any-return]
    from causalcache_memory.runtime.openai_client import OpenAIPolicy

    if isinstance(obj, OpenAIPolicy):
        return OpenAISampler(obj)
    if _is_chat_model_policy(obj):  # the agent's own wrapper: keep its coordinate convention and system
        sampler = ChatModelSampler(obj.model, coords=obj.coords, system=obj.system, parse=obj.parse)
        sampler.name = str(obj.name)
        return sampler
    if isinstance(obj, (list, tuple)) and obj and all(callable(getattr(p, "generate", None)) for p in obj):
        return PolicySampler(obj)
    if callable(getattr(obj, "generate", None)) and callable(getattr(obj, "score", None)):
        return PolicySampler([obj])
    if callable(getattr(obj, "invoke", None)):
        return ChatModelSampler(obj)
    raise ConfigError(
        f"labeller {type(obj).__name__} cannot be sampled for agreement labels; give a LangChain chat "
        "model, an OpenAIPolicy, a Policy or a list of policies"
    )


def _is_chat_model_policy(obj: Any) -> bool:
    """Whether ``obj`` is the LangGraph integration's ``ChatModelPolicy`` (imported only if loaded)."""
    import sys

    module = sys.modules.get("causalcache_memory.integrations.langgraph.policies")
    return module is not None and isinstance(obj, module.ChatModelPolicy)


class AgreementScorer:
    """``score(prompts, targets)`` = agreement rate of ``k`` sampled actions with each target action.

    Args:
        sampler: where actions come from (:func:`make_sampler` of any labeller object).
        k: samples per prompt.
        temperature: sampling temperature passed to the sampler (recorded in the label header).
        platform: ``desktop``/``mobile`` for the equivalence radius; ``auto`` reads the prompt's screen
            size (portrait = mobile).
    """

    def __init__(
        self, sampler: Sampler, *, k: int = 4, temperature: float | None = 0.7, platform: str = "auto"
    ) -> None:
        if k < 1:
            raise ConfigError(f"agreement.k={k} must be >= 1")
        self.sampler, self.k, self.temperature, self.platform = sampler, k, temperature, platform
        self.name = f"agreement:{sampler.name}"
        self.samples = 0

    @property
    def label_source(self) -> dict[str, Any]:
        return {
            "source": "agreement",
            "model": self.sampler.name,
            "k": self.k,
            "temperature": self.temperature,
        }

    def generate(self, prompt: BoundPrompt) -> Generation:
        return self.sampler.sample(prompt, temperature=self.temperature, index=0)

    def close(self) -> None:
        """Close the sampler's connections, if it holds any (an OpenAI-compatible endpoint does)."""
        close = getattr(self.sampler, "close", None)
        if callable(close):
            close()

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]:
        return [self._agreement(p, _target_action(t)) for p, t in zip(prompts, targets, strict=True)]

    def _agreement(self, prompt: BoundPrompt, ref: Action) -> float:
        platform = self._platform(prompt)
        hits = 0
        for i in range(self.k):
            got = self.sampler.sample(prompt, temperature=self.temperature, index=i).action
            hits += got is not None and actions_equivalent(ref, got, platform=platform)  # type: ignore[arg-type]
        self.samples += self.k
        return hits / self.k

    def _platform(self, prompt: BoundPrompt) -> str:
        if self.platform in ("desktop", "mobile"):
            return self.platform
        size = prompt.prompt.meta.get("screen_size")
        if isinstance(size, (tuple, list)) and len(size) == 2:
            return "mobile" if size[1] > size[0] else "desktop"
        return "desktop"


def _target_action(target: str) -> Action:
    try:
        return Action.from_dict(json.loads(target))
    except (ValueError, TypeError, KeyError) as exc:
        raise ConfigError(
            f"agreement labels compare actions: the target {target[:60]!r} is not an action JSON; "
            "set labels.target: action_json"
        ) from exc
