"""SGLang policy over HTTP: native ``/generate`` for greedy decoding and teacher-forced scoring.

No ``sglang`` import: the client speaks JSON with httpx (``sglang`` is a server-side extra). Request
and response fields follow SGLang's ``GenerateReqInput`` and the ``meta_info`` its tokenizer manager
returns (read from the SGLang source, 0.5.x):

* request: ``text`` (the templated prompt with one image placeholder per image, see
  :mod:`.chat_format`), ``image_data`` (a list of ``data:<mime>;base64,...`` URLs for one request, a list
  of such lists for a batch), ``sampling_params`` (``temperature: 0`` is greedy), ``return_logprob``,
  ``logprob_start_len``. A batch is the same request with list-valued ``text`` and per-item lists.
* image roles: ``mm_processor_kwargs = {"causalcache_image_roles": ["history", ..., "current"]}``, one role
  per image in ``image_data`` order; a batch sets ``rid`` per item and maps each rid to its roles (SGLang
  copies one ``mm_processor_kwargs`` to every item of a batch). Stock SGLang ignores the key; the
  causalcache server plugin (:mod:`.sglang_server`) gates history images and keys them by role in the
  radix cache. Images are sent in the renderer's declared order (``prompt.images``), the order the
  transformers runtime gives its processor, so both runtimes pair the ``k``-th placeholder with the same
  image even for a prompt whose placeholders are out of order.
* response: ``{"text", "meta_info": {"prompt_tokens", "completion_tokens", "cached_tokens",
  "finish_reason", "input_token_logprobs": [[logprob, token_id, text|None], ...], ...}}``, a list of those
  for a batch. ``input_token_logprobs`` covers prompt positions ``[logprob_start_len, prompt_tokens)``;
  the entry of position 0 has logprob ``None``.

Teacher-forced score of target ``y`` after prompt ``x`` (the paper's Q(S)):

    Q = (1/T) * sum_{i=P}^{P+T-1} log p(tok_i | tok_<i),   T = N - P

where ``P`` is the token count of ``x`` alone and ``N`` that of ``x + y + end_of_turn``, both read from
``meta_info.prompt_tokens`` (image tokens included, so the client needs no tokenizer). ``P`` comes from a
prompt-only request with ``max_new_tokens: 0`` (its KV stays in the radix cache for the scoring request)
and is cached per (server, prompt). The scoring request asks for logprobs from ``P - 1`` on and the client
keeps the last ``T`` entries, which is correct whether or not the server returns the boundary entry.

Routing (:mod:`.routing`): every request carries the episode key in the ``x-smg-routing-key`` header, so
one URL may be an SGLang Model Gateway that keeps an episode on one worker; with several server URLs the
client itself picks the server by rendezvous hashing of the key. The key is, in order, the ``route_key``
argument, ``prompt.prompt.meta["episode_id"]``, else the task goal text. A scoring call sends one batch
per (server, key), so each batch is routed whole.

Images: the first image request to each URL is preceded by a two-request probe (:mod:`.image_check`,
``meta_info.prompt_tokens`` with and without one image); a server (or a gateway in front of it) that
drops images raises :class:`~causalcache_memory.errors.ImagesIgnoredError`.
"""

from __future__ import annotations

import hashlib
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ConfigError, PolicyInputError, PolicyResponseError, RenderError
from causalcache_memory.policy import Generation
from causalcache_memory.runtime._http import (
    HttpClient,
    check_image_limit,
    get_field,
    parse_response_action,
    snippet,
)
from causalcache_memory.runtime.chat_format import QWEN_VL, ChatFormat, lookup_chat_format
from causalcache_memory.runtime.image_check import (
    DEFAULT_MIN_IMAGE_TOKENS,
    SGLANG_HINT,
    ImageCheck,
    sglang_probe,
)
from causalcache_memory.runtime.routing import (
    EpisodeRouter,
    rendezvous_route,
    routing_headers,
    routing_key,
    split_batch,
)
from causalcache_memory.runtime.sglang_server.roles import ROLES_KWARG

if TYPE_CHECKING:
    from causalcache_memory.actions.parse import Platform
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["SGLangPolicy", "rendezvous_route"]


class SGLangPolicy:
    """A GUI policy served by SGLang (native API).

    Args:
        urls: one server or gateway URL (``http://host:30000``) or several servers (sticky per episode).
        model_name: name used in logs and label files (:attr:`name`).
        timeout_s: per-attempt HTTP timeout.
        max_retries: retries on connection errors, 5xx and 429.
        max_new_tokens: generation cap.
        max_images_per_prompt: refuse prompts with more images before sending (None: no limit).
        platform, screen_size: passed to the action parser (``platform`` e.g. ``"desktop"``/``"mobile"``).
        chat_format: a :class:`ChatFormat` or its registered name (default Qwen-VL ChatML).
        score_batch_size: prompts per ``/generate`` batch when scoring.
        sampling_params: extra sampling parameters merged into generation requests.
        gateway: ``urls`` is one SGLang Model Gateway: batches go as single-prompt requests (the
            gateway's ``/generate`` takes a string ``text`` only), each with the episode's routing key.
        check_images: probe each URL once before its first image request and raise
            :class:`~causalcache_memory.errors.ImagesIgnoredError` when images are dropped;
            ``min_image_tokens`` is the fewest tokens an encoded image must add.
    """

    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        model_name: str = "sglang",
        timeout_s: float = 60.0,
        max_retries: int = 3,
        max_new_tokens: int = 256,
        max_images_per_prompt: int | None = None,
        platform: Platform = "auto",
        screen_size: tuple[int, int] | None = None,
        chat_format: str | ChatFormat = QWEN_VL,
        score_batch_size: int = 16,
        sampling_params: dict[str, Any] | None = None,
        backoff_s: float = 0.25,
        prompt_len_cache_size: int = 4096,
        gateway: bool = False,
        check_images: bool = True,
        min_image_tokens: int = DEFAULT_MIN_IMAGE_TOKENS,
    ) -> None:
        url_list = [urls] if isinstance(urls, str) else list(urls)
        problems = []
        if not url_list:
            problems.append("urls is empty; give at least one server URL such as http://127.0.0.1:30000")
        for url in url_list:
            if not isinstance(url, str) or not url.startswith(("http://", "https://")):
                problems.append(f"urls entry {url!r} must start with http:// or https://")
        if len(set(url_list)) != len(url_list):
            problems.append(f"urls={url_list!r} has duplicates; list each server once")
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            problems.append(f"max_new_tokens={max_new_tokens!r} must be an integer >= 1")
        if max_images_per_prompt is not None and (
            not isinstance(max_images_per_prompt, int) or max_images_per_prompt < 1
        ):
            problems.append(
                f"max_images_per_prompt={max_images_per_prompt!r} must be None or an integer >= 1"
            )
        if not isinstance(score_batch_size, int) or score_batch_size < 1:
            problems.append(f"score_batch_size={score_batch_size!r} must be an integer >= 1")
        if gateway and len(url_list) != 1:
            problems.append(f"gateway=True needs exactly one URL (the gateway), got {len(url_list)}")
        if problems:
            raise ConfigError("invalid SGLangPolicy arguments: " + "; ".join(problems), problems)
        self.urls = tuple(u.rstrip("/") for u in url_list)
        self._router = EpisodeRouter(self.urls)
        self.gateway = gateway
        self.name = model_name
        self.max_new_tokens = max_new_tokens
        self.max_images_per_prompt = max_images_per_prompt
        self.platform = platform
        self.screen_size = screen_size
        self.chat_format = lookup_chat_format(chat_format)
        self.score_batch_size = score_batch_size
        self.sampling_params = dict(sampling_params or {})
        self._http = HttpClient(timeout_s=timeout_s, max_retries=max_retries, backoff_s=backoff_s)
        self._prompt_lens: OrderedDict[tuple[str, str], int] = OrderedDict()
        self._cache_size = prompt_len_cache_size
        self._lock = threading.Lock()
        self._image_check = (
            ImageCheck(min_image_tokens=min_image_tokens, hint=SGLANG_HINT) if check_images else None
        )

    # ------------------------------------------------------------------ lifecycle
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SGLangPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SGLangPolicy(name={self.name!r}, urls={list(self.urls)!r})"

    # ------------------------------------------------------------------ routing
    def route(self, prompt: BoundPrompt | None = None, route_key: str | None = None) -> str:
        """The server URL for ``prompt`` (see the module docstring for the key)."""
        return self._router.url(routing_key(prompt, route_key))

    # ------------------------------------------------------------------ request pieces
    def _format(self, prompt: BoundPrompt) -> tuple[str, list[str]]:
        chat = self.chat_format.format(prompt.messages)
        if sorted(chat.image_indices) != list(range(len(prompt.images))):
            raise RenderError(
                f"chat format {self.chat_format.name!r} placed images {list(chat.image_indices)} but the prompt "
                f"declares {len(prompt.images)} images; every declared image must appear exactly once"
            )
        # declared order, as the transformers runtime (processor images = prompt.images order)
        return chat.text, [prompt.data_url(i) for i in range(len(prompt.images))]

    @staticmethod
    def _roles(prompt: BoundPrompt) -> list[str]:
        """One role per image, in ``image_data`` (declared) order."""
        return [ref.role for ref in prompt.images]

    def _prompt_key(self, text: str, prompt: BoundPrompt) -> str:
        h = hashlib.sha256(text.encode())
        for ref in prompt.images:
            h.update(ref.sha256.encode())
        return h.hexdigest()

    # ------------------------------------------------------------------ image check
    def _check_images(self, url: str, prompts: Sequence[BoundPrompt], headers: dict[str, str]) -> None:
        if self._image_check is None or not any(p.images for p in prompts):
            return

        def count(with_image: bool) -> int:
            payload = sglang_probe(self.chat_format, with_image)
            body = self._http.post_json(f"{url}/generate", payload, headers=headers)
            body = body[0] if isinstance(body, list) and len(body) == 1 else body
            return get_field(body, "meta_info.prompt_tokens", url=url, kind=int)

        self._image_check.ensure(url, count)

    # ------------------------------------------------------------------ generate
    def generate(self, prompt: BoundPrompt, *, route_key: str | None = None) -> Generation:
        """Greedy decoding of the next response; the action is parsed, never raising on bad output."""
        check_image_limit([prompt], self.max_images_per_prompt, server=f"SGLang policy {self.name!r}")
        url = self.route(prompt, route_key)
        text, images = self._format(prompt)
        headers = routing_headers(routing_key(prompt, route_key))
        self._check_images(url, [prompt], headers)
        payload: dict[str, Any] = {
            "text": text,
            "sampling_params": {
                **self.sampling_params,
                "temperature": 0,
                "max_new_tokens": self.max_new_tokens,
            },
        }
        if images:
            payload["image_data"] = images
            payload["mm_processor_kwargs"] = {ROLES_KWARG: self._roles(prompt)}
        start = time.perf_counter()
        body = self._http.post_json(f"{url}/generate", payload, headers=headers)
        latency = time.perf_counter() - start
        if isinstance(body, list) and len(body) == 1:
            body = body[0]
        response = get_field(body, "text", url=url, kind=str)
        meta_info = get_field(body, "meta_info", url=url, kind=dict)
        action, error = parse_response_action(response, platform=self.platform, screen_size=self.screen_size)
        meta: dict[str, Any] = {"server": url, "runtime": "sglang"}
        for key in ("prompt_tokens", "completion_tokens", "cached_tokens"):
            if isinstance(meta_info.get(key), int):
                meta[key] = meta_info[key]
        finish = meta_info.get("finish_reason")
        if isinstance(finish, dict) and isinstance(finish.get("type"), str):
            meta["finish_reason"] = finish["type"]
        cached = meta_info.get("cached_tokens") if isinstance(meta_info.get("cached_tokens"), int) else None
        return Generation(response, action, error, latency, meta, cached_tokens=cached)

    # ------------------------------------------------------------------ score
    def score(
        self, prompts: Sequence[BoundPrompt], targets: Sequence[str], *, route_key: str | None = None
    ) -> list[float]:
        """Mean target-token log-likelihood of each ``targets[i]`` after ``prompts[i]`` (<= 0)."""
        if len(prompts) != len(targets):
            raise PolicyInputError(
                f"score got {len(prompts)} prompts but {len(targets)} targets; pass one target per prompt"
            )
        for i, target in enumerate(targets):
            if not isinstance(target, str) or not target:
                raise PolicyInputError(f"targets[{i}]={target!r} must be a non-empty string")
        check_image_limit(prompts, self.max_images_per_prompt, server=f"SGLang policy {self.name!r}")
        groups: dict[tuple[str, str | None], list[int]] = {}
        for i, prompt in enumerate(prompts):
            key = routing_key(prompt, route_key)
            groups.setdefault((self._router.url(key), key), []).append(i)
        scores: list[float] = [0.0] * len(prompts)
        for (url, key), indices in groups.items():
            headers = routing_headers(key)
            self._check_images(url, [prompts[i] for i in indices], headers)
            for start in range(0, len(indices), self.score_batch_size):
                chunk = indices[start : start + self.score_batch_size]
                values = self._score_batch(
                    url, [prompts[i] for i in chunk], [targets[i] for i in chunk], headers
                )
                for i, value in zip(chunk, values, strict=True):
                    scores[i] = value
        return scores

    def _score_batch(
        self, url: str, prompts: list[BoundPrompt], targets: list[str], headers: dict[str, str]
    ) -> list[float]:
        formatted = [self._format(p) for p in prompts]
        keys = [(url, self._prompt_key(text, p)) for (text, _), p in zip(formatted, prompts, strict=True)]
        roles = [self._roles(p) for p in prompts]
        lens = self._prompt_lengths(url, formatted, roles, keys, headers)
        texts = [
            text + self.chat_format.target_text(t) for (text, _), t in zip(formatted, targets, strict=True)
        ]
        payload = self._batch_payload(texts, [imgs for _, imgs in formatted], roles)
        payload["return_logprob"] = True
        payload["logprob_start_len"] = [max(n - 1, 0) for n in lens]
        results = self._batch_results(url, payload, len(texts), headers)
        out = []
        for j, (result, p_len) in enumerate(zip(results, lens, strict=True)):
            n_len = get_field(result, "meta_info.prompt_tokens", url=url, kind=int)
            entries = get_field(result, "meta_info.input_token_logprobs", url=url, kind=list)
            n_target = n_len - p_len
            if n_target < 1 or len(entries) < n_target:
                raise PolicyResponseError(
                    f"scoring item {j} at {url}: prompt has {p_len} tokens, prompt+target {n_len} tokens and "
                    f"{len(entries)} input logprobs were returned; expected at least {max(n_target, 1)} target "
                    f"tokens (target {snippet(targets[j], 60)})"
                )
            out.append(_mean_logprob(entries[-n_target:], url=url, item=j))
        return out

    def _prompt_lengths(
        self,
        url: str,
        formatted: list[tuple[str, list[str]]],
        roles: list[list[str]],
        keys: list[tuple[str, str]],
        headers: dict[str, str],
    ) -> list[int]:
        with self._lock:
            known = {k: self._prompt_lens[k] for k in keys if k in self._prompt_lens}
        missing = [j for j, k in enumerate(keys) if k not in known]
        if missing:
            payload = self._batch_payload(
                [formatted[j][0] for j in missing],
                [formatted[j][1] for j in missing],
                [roles[j] for j in missing],
            )
            results = self._batch_results(url, payload, len(missing), headers)
            with self._lock:
                for j, result in zip(missing, results, strict=True):
                    n = get_field(result, "meta_info.prompt_tokens", url=url, kind=int)
                    known[keys[j]] = n
                    self._prompt_lens[keys[j]] = n
                    self._prompt_lens.move_to_end(keys[j])
                while len(self._prompt_lens) > self._cache_size:
                    self._prompt_lens.popitem(last=False)
        return [known[k] for k in keys]

    @staticmethod
    def _batch_payload(texts: list[str], images: list[list[str]], roles: list[list[str]]) -> dict[str, Any]:
        payload: dict[str, Any] = {"text": texts, "sampling_params": {"temperature": 0, "max_new_tokens": 0}}
        if any(images):
            payload["image_data"] = [imgs or None for imgs in images]
            rids = [uuid.uuid4().hex for _ in texts]
            payload["rid"] = rids
            payload["mm_processor_kwargs"] = {
                ROLES_KWARG: {rid: r for rid, r, imgs in zip(rids, roles, images, strict=True) if imgs}
            }
        return payload

    def _batch_results(
        self, url: str, payload: dict[str, Any], n: int, headers: dict[str, str]
    ) -> list[dict[str, Any]]:
        if self.gateway:
            body = [
                self._http.post_json(f"{url}/generate", p, headers=headers) for p in split_batch(payload, n)
            ]
        else:
            body = self._http.post_json(f"{url}/generate", payload, headers=headers)
        if not isinstance(body, list) or len(body) != n or not all(isinstance(r, dict) for r in body):
            raise PolicyResponseError(
                f"batch /generate at {url} should answer a list of {n} objects; body: {snippet(body)}"
            )
        return body


def _mean_logprob(entries: list[Any], *, url: str, item: int) -> float:
    total = 0.0
    for k, entry in enumerate(entries):
        value = entry[0] if isinstance(entry, (list, tuple)) and entry else None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise PolicyResponseError(
                f"`meta_info.input_token_logprobs` entry {k} of scoring item {item} from {url} should be "
                f"[logprob, token_id, text] with a finite logprob; got {snippet(entry, 80)}"
            )
        total += float(value)
    return total / len(entries)


def policy_from_config(config: PolicyConfig) -> SGLangPolicy:
    """The runtime registered as ``sglang`` (:mod:`causalcache_memory.runtime.registry`)."""
    cfg = config.sglang
    if cfg is None:  # pragma: no cover - PolicyConfig refuses this
        raise ConfigError("policy.kind is 'sglang' but the policy.sglang section is missing")
    return SGLangPolicy(
        list(cfg.endpoints()),
        timeout_s=cfg.timeout_s,
        max_retries=cfg.max_retries,
        max_new_tokens=cfg.max_new_tokens,
        max_images_per_prompt=cfg.max_images_per_prompt,
        platform=config.platform,
        gateway=cfg.gateway_url is not None,
    )
