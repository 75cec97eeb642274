"""A policy behind any OpenAI-compatible chat endpoint (vLLM, SGLang ``/v1``, hosted APIs).

Generation: ``POST {base_url}/chat/completions`` with :func:`~causalcache_memory.runtime.chat_format.openai_messages` (images as
``image_url`` data URLs), ``temperature: 0``.

Scoring needs the log-probabilities of *prompt* tokens, which the OpenAI API does not return. vLLM
does, through its ``prompt_logprobs`` extension of the chat API; the client then

1. reads ``P = usage.prompt_tokens`` of the prompt with the generation prompt (one-token request,
   cached per prompt),
2. sends the prompt plus an assistant message holding ``target + target_suffix`` with
   ``add_generation_prompt: false, continue_final_message: true, prompt_logprobs: 0`` and reads the
   top-level ``prompt_logprobs`` list (``N`` entries, the first ``None``; entry ``i`` maps token ids to
   ``{"logprob", "rank", "decoded_token"}`` and holds the actual token ``i``),
3. returns the mean logprob of the last ``N - P`` entries.

An endpoint that answers without ``prompt_logprobs`` (OpenAI, SGLang ``/v1``), or rejects the field,
raises :class:`PromptLogprobsUnsupportedError`; use :class:`SGLangPolicy` (native API) or the embedded
``TransformersPolicy`` to score. ``prompt_logprobs=False`` raises it without sending anything.

Images: the first request with images to an endpoint is preceded by a two-request probe
(:mod:`.image_check`): a server that does not spend tokens on an image (a tokenizer-only processor, a
text-only model) raises :class:`~causalcache_memory.errors.ImagesIgnoredError` instead of answering blind.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ConfigError, PolicyError, PolicyInputError, PolicyResponseError
from causalcache_memory.policy import Generation
from causalcache_memory.runtime._http import (
    HttpClient,
    PolicyRequestRejectedError,
    check_image_limit,
    get_field,
    parse_response_action,
    snippet,
)
from causalcache_memory.runtime.chat_format import openai_messages
from causalcache_memory.runtime.image_check import (
    DEFAULT_MIN_IMAGE_TOKENS,
    OPENAI_HINT,
    ImageCheck,
    openai_probe_messages,
)

if TYPE_CHECKING:
    from causalcache_memory.actions.parse import Platform
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["OpenAIPolicy", "PromptLogprobsUnsupportedError"]


class PromptLogprobsUnsupportedError(PolicyError, NotImplementedError):
    """The endpoint returns no prompt logprobs, so it cannot score targets."""


class OpenAIPolicy:
    """A GUI policy behind an OpenAI-compatible ``/chat/completions`` endpoint.

    Args:
        base_url: API root including the version, e.g. ``http://127.0.0.1:8000/v1``.
        model: the served model name sent as ``model``.
        api_key: bearer token; when None it is read from the environment variable ``api_key_env``
            (no header when that is unset too, as local servers need none).
        timeout_s, max_retries: per-attempt timeout and retries on connection errors, 5xx, 429.
        max_tokens: generation cap.
        max_images_per_prompt: refuse prompts with more images before sending (None: no limit).
        platform, screen_size: passed to the action parser.
        prompt_logprobs: None = try vLLM's ``prompt_logprobs`` and raise a clear error when absent;
            False = the endpoint has none (score raises at once); True = require them.
        target_suffix: appended to each scored target (e.g. ``"<|im_end|>"`` to match SGLangPolicy's
            end-of-turn scoring on a Qwen-VL server).
        extra_body: extra JSON fields merged into every request.
        check_images: probe the endpoint once before its first image request and raise
            :class:`~causalcache_memory.errors.ImagesIgnoredError` when it drops images
            (:mod:`.image_check`); ``min_image_tokens`` is the fewest tokens an encoded image must add.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        max_tokens: int = 256,
        max_images_per_prompt: int | None = None,
        platform: Platform = "auto",
        screen_size: tuple[int, int] | None = None,
        prompt_logprobs: bool | None = None,
        target_suffix: str = "",
        extra_body: dict[str, Any] | None = None,
        backoff_s: float = 0.25,
        name: str | None = None,
        check_images: bool = True,
        min_image_tokens: int = DEFAULT_MIN_IMAGE_TOKENS,
    ) -> None:
        problems = []
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            problems.append(
                f"base_url={base_url!r} must start with http:// or https:// (e.g. http://host:8000/v1)"
            )
        if not isinstance(model, str) or not model:
            problems.append(f"model={model!r} must be the served model name")
        if not isinstance(max_tokens, int) or max_tokens < 1:
            problems.append(f"max_tokens={max_tokens!r} must be an integer >= 1")
        if max_images_per_prompt is not None and (
            not isinstance(max_images_per_prompt, int) or max_images_per_prompt < 1
        ):
            problems.append(
                f"max_images_per_prompt={max_images_per_prompt!r} must be None or an integer >= 1"
            )
        if problems:
            raise ConfigError("invalid OpenAIPolicy arguments: " + "; ".join(problems), problems)
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.name = name or model
        self.max_tokens = max_tokens
        self.max_images_per_prompt = max_images_per_prompt
        self.platform = platform
        self.screen_size = screen_size
        self.prompt_logprobs = prompt_logprobs
        self.target_suffix = target_suffix
        self.extra_body = dict(extra_body or {})
        key = api_key if api_key is not None else os.environ.get(api_key_env)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._http = HttpClient(
            timeout_s=timeout_s, max_retries=max_retries, backoff_s=backoff_s, headers=headers
        )
        self._prompt_lens: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._image_check = (
            ImageCheck(min_image_tokens=min_image_tokens, hint=OPENAI_HINT) if check_images else None
        )

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> OpenAIPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAIPolicy(model={self.model!r}, base_url={self.base_url!r})"

    # ------------------------------------------------------------------ generate
    def generate(self, prompt: BoundPrompt, *, temperature: float = 0.0) -> Generation:
        """Greedy decoding (``temperature=0``; agreement labels sample with a higher one); an unparsable
        response gives ``action=None`` and ``parse_error``."""
        check_image_limit([prompt], self.max_images_per_prompt, server=f"endpoint {self.url}")
        self._check_images([prompt])
        payload = {
            **self.extra_body,
            "model": self.model,
            "messages": openai_messages(prompt),
            "temperature": temperature,
            "max_tokens": self.max_tokens,
        }
        start = time.perf_counter()
        body = self._http.post_json(self.url, payload)
        latency = time.perf_counter() - start
        response = get_field(body, "choices.0.message.content", url=self.url, kind=str)
        action, error = parse_response_action(response, platform=self.platform, screen_size=self.screen_size)
        meta: dict[str, Any] = {"server": self.base_url, "runtime": "openai", "model": self.model}
        usage = body.get("usage") if isinstance(body, dict) else None
        if isinstance(usage, dict):
            for key in ("prompt_tokens", "completion_tokens"):
                if isinstance(usage.get(key), int):
                    meta[key] = usage[key]
        finish = body["choices"][0].get("finish_reason") if isinstance(body["choices"][0], dict) else None
        if isinstance(finish, str):
            meta["finish_reason"] = finish
        return Generation(response, action, error, latency, meta)

    # ------------------------------------------------------------------ image check
    def _check_images(self, prompts: Sequence[BoundPrompt]) -> None:
        if self._image_check is not None and any(p.images for p in prompts):
            self._image_check.ensure(self.url, self._probe_prompt_tokens)

    def _probe_prompt_tokens(self, with_image: bool) -> int:
        payload = {
            **self.extra_body,
            "model": self.model,
            "messages": openai_probe_messages(with_image),
            "temperature": 0,
            "max_tokens": 1,
        }
        body = self._http.post_json(self.url, payload)
        return get_field(body, "usage.prompt_tokens", url=self.url, kind=int)

    # ------------------------------------------------------------------ score
    def _unsupported(self, detail: str) -> PromptLogprobsUnsupportedError:
        return PromptLogprobsUnsupportedError(
            f"{self.url} returns no prompt logprobs ({detail}), so OpenAIPolicy cannot score targets with "
            "it. Serve the model with vLLM (prompt_logprobs extension), or score with SGLangPolicy (native "
            "/generate) or the embedded TransformersPolicy."
        )

    def score(self, prompts: Sequence[BoundPrompt], targets: Sequence[str]) -> list[float]:
        """Mean target-token log-likelihood (<= 0) per prompt; needs vLLM-style prompt logprobs."""
        if len(prompts) != len(targets):
            raise PolicyInputError(
                f"score got {len(prompts)} prompts but {len(targets)} targets; pass one target per prompt"
            )
        for i, target in enumerate(targets):
            if not isinstance(target, str) or not target:
                raise ConfigError(f"targets[{i}]={target!r} must be a non-empty string")
        if self.prompt_logprobs is False:
            raise self._unsupported("prompt_logprobs=False was configured")
        check_image_limit(prompts, self.max_images_per_prompt, server=f"endpoint {self.url}")
        self._check_images(prompts)
        return [self._score_one(p, t) for p, t in zip(prompts, targets, strict=True)]

    def _post_scoring(self, payload: dict[str, Any]) -> Any:
        try:
            return self._http.post_json(self.url, payload)
        except PolicyRequestRejectedError as exc:
            if "logprob" in exc.body or "continue_final_message" in exc.body:
                raise self._unsupported(f"it rejected the request: {snippet(exc.body, 200)}") from exc
            raise

    def _prompt_len(self, messages: list[dict[str, Any]]) -> int:
        key = hashlib.sha256(json.dumps(messages, sort_keys=True).encode()).hexdigest()
        with self._lock:
            if key in self._prompt_lens:
                return self._prompt_lens[key]
        body = self._http.post_json(
            self.url,
            {**self.extra_body, "model": self.model, "messages": messages, "temperature": 0, "max_tokens": 1},
        )
        n = get_field(body, "usage.prompt_tokens", url=self.url, kind=int)
        with self._lock:
            self._prompt_lens[key] = n
            while len(self._prompt_lens) > 4096:
                self._prompt_lens.popitem(last=False)
        return n

    def _score_one(self, prompt: BoundPrompt, target: str) -> float:
        messages = openai_messages(prompt)
        p_len = self._prompt_len(messages)
        payload = {
            **self.extra_body,
            "model": self.model,
            "messages": [*messages, {"role": "assistant", "content": target + self.target_suffix}],
            "temperature": 0,
            "max_tokens": 1,
            "add_generation_prompt": False,
            "continue_final_message": True,
            "prompt_logprobs": 0,
            "return_token_ids": True,
        }
        body = self._post_scoring(payload)
        entries = body.get("prompt_logprobs") if isinstance(body, dict) else None
        if entries is None:
            raise self._unsupported("the response has no `prompt_logprobs` field")
        if not isinstance(entries, list):
            raise PolicyResponseError(
                f"`prompt_logprobs` from {self.url} should be a list; got {snippet(entries)}"
            )
        token_ids = body.get("prompt_token_ids")
        n_target = len(entries) - p_len
        if n_target < 1:
            raise PolicyResponseError(
                f"{self.url}: prompt has {p_len} tokens but prompt+target has {len(entries)} prompt logprobs; "
                f"the target {snippet(target, 60)} added no tokens"
            )
        first = len(entries) - n_target
        values = [
            _entry_logprob(
                entries[k], token_ids[k] if isinstance(token_ids, list) else None, url=self.url, k=k
            )
            for k in range(first, len(entries))
        ]
        return sum(values) / len(values)


def _entry_logprob(entry: Any, token_id: int | None, *, url: str, k: int) -> float:
    """Logprob of the actual token from one vLLM ``prompt_logprobs`` entry."""
    if not isinstance(entry, dict) or not entry:
        raise PolicyResponseError(
            f"`prompt_logprobs[{k}]` from {url} should be a token->logprob map; got {snippet(entry, 80)}"
        )
    if token_id is not None and str(token_id) in entry:
        cand = entry[str(token_id)]
    elif len(entry) == 1:
        cand = next(iter(entry.values()))
    else:
        raise PolicyResponseError(
            f"`prompt_logprobs[{k}]` from {url} has {len(entry)} candidates and no `prompt_token_ids` tells "
            "which is the prompt token; send prompt_logprobs=0"
        )
    value = cand.get("logprob") if isinstance(cand, dict) else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise PolicyResponseError(
            f"`prompt_logprobs[{k}]` from {url} has no finite numeric logprob: {snippet(cand, 80)}"
        )
    return float(value)


def policy_from_config(config: PolicyConfig) -> OpenAIPolicy:
    """The runtime registered as ``openai`` (:mod:`causalcache_memory.runtime.registry`)."""
    cfg = config.openai
    if cfg is None:  # pragma: no cover - PolicyConfig refuses this
        raise ConfigError("policy.kind is 'openai' but the policy.openai section is missing")
    return OpenAIPolicy(
        cfg.base_url,
        cfg.model,
        api_key=os.environ.get(cfg.api_key_env),
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
        max_tokens=cfg.max_tokens,
        max_images_per_prompt=cfg.max_images_per_prompt,
        platform=config.platform,
    )
