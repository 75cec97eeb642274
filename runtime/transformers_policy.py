"""Embedded policy runtime: a Qwen2.5-VL / Qwen3-VL model run in-process with transformers.

``generate`` decodes greedily; ``score`` is Q(S) of the paper: the teacher-forced mean log-likelihood of
a target response given a rendered prompt,

    score(prompt, target) = (1/n) * sum_{k=1..n} log p(y_k | prompt, y_<k),

where ``y_1..y_n`` are the target's tokens followed by the closing ``<|im_end|>`` (the assistant turn
ends there, so a response that should have stopped earlier or later is penalised). Targets are tokenized
as the assistant continuation right after the generation prompt ``<|im_start|>assistant\\n``.
Prompts are right-padded, so a prompt's score does not depend on its batch.

Vision-encoder outputs are reused across calls (:mod:`~.vision_cache`): each distinct image of a batch is
encoded once and kept in a bounded LRU (``vision_cache_mb``, default 512; 0 = off). ``grad=True`` forwards
bypass it, as do models without transformers 5.24's ``mm_encoder_outputs`` (logged once).

Adapters (the HGKV gate) plug in through :class:`ForwardAdapter`: every forward pass of ``generate`` and
``score`` runs inside ``adapter.forward_context(model, batch)``, which receives the
:class:`~.qwen_encoding.EncodedBatch` (with ``history_mask()``) and installs/removes its token gate.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from causalcache_memory._optional import require
from causalcache_memory.errors import ActionParseError, ConfigError, PolicyInputError
from causalcache_memory.policy import Generation
from causalcache_memory.runtime.qwen_encoding import (
    EncodedBatch,
    EncodedPrompt,
    QwenTokens,
    collate,
    encode_prompt,
    image_only_processor_class,
)
from causalcache_memory.runtime.vision_cache import VisionCache, check_vision_cache_mb, unsupported_reason

if TYPE_CHECKING:
    import torch

    from causalcache_memory.actions.parse import Platform
    from causalcache_memory.config.models import PolicyConfig
    from causalcache_memory.render.messages import BoundPrompt

__all__ = ["SUPPORTED_FAMILIES", "ForwardAdapter", "TransformersPolicy"]

#: ``config.model_type`` values this runtime loads
SUPPORTED_FAMILIES = ("qwen2_5_vl", "qwen3_vl")

log = logging.getLogger("causalcache_memory.runtime.transformers_policy")
_LOGGED: set[str] = set()  # reasons already logged (once per process)


@runtime_checkable
class ForwardAdapter(Protocol):
    """Something that modifies the model during one forward pass (e.g. the HGKV token gate).

    ``forward_context(model, batch)`` returns a context manager; the policy holds it around every
    forward pass over ``batch``. During ``generate`` it is held for the whole decoding loop: the batch
    describes the prompt only, and positions past the prompt (generated tokens) are never history tokens.
    """

    def forward_context(self, model: Any, batch: EncodedBatch) -> contextlib.AbstractContextManager[Any]: ...


def _resolve_dtype(torch: Any, dtype: Any, device: str) -> Any:
    if dtype is None:
        return torch.float32 if str(device).startswith("cpu") else torch.bfloat16
    if isinstance(dtype, str):
        value = getattr(torch, dtype, None)
        if not isinstance(value, torch.dtype):
            raise ConfigError(f"dtype={dtype!r} is not a torch dtype; use e.g. 'float32' or 'bfloat16'")
        return value
    return dtype


def _model_type(config_path: Path) -> object:
    import json

    try:
        return json.loads(config_path.read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{config_path} is not a readable JSON model config: {exc}") from exc


def _read_chat_template(path: Path, tokenizer: Any) -> str:
    """The model's own chat template: ``chat_template.jinja``, ``chat_template.json``, or the tokenizer's."""
    import json

    jinja = path / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8")
    as_json = path / "chat_template.json"
    if as_json.is_file():
        return str(json.loads(as_json.read_text(encoding="utf-8"))["chat_template"])
    if getattr(tokenizer, "chat_template", None):
        return str(tokenizer.chat_template)
    raise ConfigError(
        f"model directory {path} has no chat template (chat_template.jinja/.json or tokenizer's)"
    )


class TransformersPolicy:
    """A Qwen-VL policy run with transformers. Build it with :meth:`from_pretrained`."""

    def __init__(
        self,
        model: Any,
        processor: Any,
        *,
        family: str,
        name: str,
        max_new_tokens: int = 64,
        platform: Platform = "auto",
        screen_size: tuple[int, int] | None = None,
        adapter: ForwardAdapter | None = None,
        vision_cache_mb: int = 512,
    ) -> None:
        self.model = model
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.family = family
        self.name = name
        self.max_new_tokens = max_new_tokens
        self.platform = platform
        self.screen_size = screen_size
        self.adapter = adapter
        config = model.config
        self.tokens = QwenTokens(
            image_pad=int(config.image_token_id),
            vision_start=int(config.vision_start_token_id),
            vision_end=int(config.vision_end_token_id),
            merge_size=int(processor.image_processor.merge_size),
        )
        self.im_end_id = int(self.tokenizer.convert_tokens_to_ids("<|im_end|>"))
        pad = self.tokenizer.pad_token_id
        self.pad_token_id = int(pad if pad is not None else self.im_end_id)
        self.vision_cache: VisionCache | None = VisionCache.from_mb(check_vision_cache_mb(vision_cache_mb))
        reason = unsupported_reason(model) if self.vision_cache is not None else None
        if reason is not None:
            if reason not in _LOGGED:
                _LOGGED.add(reason)
                log.warning("vision-encoder cache off: %s; every image is encoded in every forward", reason)
            self.vision_cache = None

    # ------------------------------------------------------------------ loading
    @classmethod
    def from_pretrained(
        cls,
        path: str | Path,
        *,
        device: str = "cpu",
        dtype: Any = None,
        max_new_tokens: int = 64,
        platform: Platform = "auto",
        screen_size: tuple[int, int] | None = None,
        adapter: ForwardAdapter | str | Path | None = None,
        vision_cache_mb: int = 512,
    ) -> TransformersPolicy:
        """Load a model directory (local only: nothing is downloaded).

        ``dtype`` defaults to float32 on CPU and bfloat16 elsewhere. ``adapter`` is an adapter object or the
        directory of a saved HGKV / ungated adapter (``causalcache train hgkv`` output); a directory is read,
        checked against the loaded model (layer count, model type, shapes, finite weights) and attached here.
        Use ``policy.adapter.disable_adapter()`` for the frozen arm. ``vision_cache_mb`` bounds the
        vision-encoder output cache (MiB; 0 = off; see :mod:`~.vision_cache`).
        """
        check_vision_cache_mb(vision_cache_mb)
        root = Path(path)
        if not (root / "config.json").is_file():
            raise ConfigError(
                f"path={str(path)!r} is not a local model directory with a config.json; download the model "
                "first (e.g. `huggingface-cli download <repo> --local-dir DIR`) and pass DIR"
            )
        family = _model_type(root / "config.json")
        if family not in SUPPORTED_FAMILIES:
            raise ConfigError(
                f"model_type={family!r} in {root / 'config.json'} is not supported by TransformersPolicy; "
                f"supported families: {', '.join(SUPPORTED_FAMILIES)}"
            )
        torch = require("torch", purpose="TransformersPolicy")
        transformers = require("transformers", purpose="TransformersPolicy")
        model = transformers.AutoModelForImageTextToText.from_pretrained(
            root, local_files_only=True, dtype=_resolve_dtype(torch, dtype, device)
        )
        model.to(device).eval()
        tokenizer = transformers.AutoTokenizer.from_pretrained(root, local_files_only=True)
        image_processor = transformers.Qwen2VLImageProcessorPil.from_pretrained(root, local_files_only=True)
        processor = image_only_processor_class(family)(
            image_processor=image_processor,
            tokenizer=tokenizer,
            chat_template=_read_chat_template(root, tokenizer),
        )
        if isinstance(adapter, (str, Path)):
            from causalcache_memory.runtime.hgkv.adapter import HGKVAdapter

            # attached now, so an adapter saved from another model fails here, not at the first forward
            adapter = HGKVAdapter.load(adapter, model=model)
        return cls(
            model,
            processor,
            family=family,
            name=f"transformers:{root.name}",
            max_new_tokens=max_new_tokens,
            platform=platform,
            screen_size=screen_size,
            adapter=adapter,
            vision_cache_mb=vision_cache_mb,
        )

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    # ------------------------------------------------------------------ encoding and hooks
    def encode(self, prompt: BoundPrompt) -> EncodedPrompt:
        """Encode one prompt with the model's processor; image spans are checked fail-closed."""
        return encode_prompt(prompt, self.processor, self.tokens)

    @contextlib.contextmanager
    def forward_context(self, batch: EncodedBatch) -> Iterator[None]:
        """Context held around forward passes over ``batch``; delegates to the adapter if one is set."""
        if self.adapter is None:
            yield
            return
        with self.adapter.forward_context(self.model, batch):
            yield

    def model_inputs(self, batch: EncodedBatch, *, grad: bool = False) -> dict[str, Any]:
        """Keyword arguments of ``forward``/``generate`` for ``batch`` on the model's device.

        With the vision cache on (and ``grad`` off) the images arrive as ``mm_encoder_outputs`` (each
        distinct image encoded once, see :mod:`~.vision_cache`) instead of ``pixel_values``.
        """
        if self.vision_cache is None or grad or batch.pixel_values is None or batch.image_grid_thw is None:
            return batch.model_inputs(self.device)
        features = self.vision_cache.image_features(self.model, batch.pixel_values, batch.image_grid_thw)
        inputs = replace(batch, pixel_values=None).model_inputs(self.device)
        inputs["mm_encoder_outputs"] = {"image": features}
        return inputs

    def target_ids(self, target: str) -> list[int]:
        """Token ids scored for ``target``: its text tokens then ``<|im_end|>``."""
        ids = self.tokenizer(target, add_special_tokens=False)["input_ids"]
        return [int(i) for i in ids] + [self.im_end_id]

    # ------------------------------------------------------------------ Policy protocol
    def generate(self, prompt: BoundPrompt) -> Generation:
        """Greedy decoding; an unparsable response gives ``action=None`` and ``parse_error``, not an error."""
        torch = require("torch", purpose="TransformersPolicy.generate")
        transformers = require("transformers", purpose="TransformersPolicy.generate")
        batch = collate([self.encode(prompt)], pad_token_id=self.pad_token_id)
        config = transformers.GenerationConfig(
            max_new_tokens=self.max_new_tokens,
            do_sample=False,
            eos_token_id=self.im_end_id,
            pad_token_id=self.pad_token_id,
        )
        start = time.perf_counter()
        with torch.inference_mode(), self.forward_context(batch):
            out = self.model.generate(**self.model_inputs(batch), generation_config=config)
        latency = time.perf_counter() - start
        new = out[0, batch.input_ids.shape[1] :]
        response = self.tokenizer.decode(new, skip_special_tokens=True)
        action, error = self._parse(response)
        meta = {"prompt_tokens": int(batch.input_ids.shape[1]), "completion_tokens": int(new.shape[0])}
        return Generation(response, action, error, latency, meta)

    def _parse(self, response: str) -> tuple[Any, str | None]:
        try:
            from causalcache_memory.actions import parse_action
        except ImportError:
            return None, "no action parser available (causalcache_memory.actions.parse_action is missing)"
        try:
            return parse_action(response, platform=self.platform, screen_size=self.screen_size), None
        except ActionParseError as exc:
            return None, str(exc)

    def score(
        self, prompts: Sequence[BoundPrompt], targets: Sequence[str], *, batch_size: int | None = None
    ) -> list[float]:
        """Mean target-token log-likelihood of each ``(prompt, target)``; see the module docstring."""
        if len(prompts) != len(targets):
            raise PolicyInputError(
                f"score got {len(prompts)} prompts but {len(targets)} targets; pass one target each"
            )
        if batch_size is not None and batch_size < 1:
            raise ConfigError(f"batch_size={batch_size} must be >= 1 (or None for one batch)")
        step = batch_size or max(len(prompts), 1)
        scores: list[float] = []
        for lo in range(0, len(prompts), step):
            encoded = [self.encode(p) for p in prompts[lo : lo + step]]
            ids = [self.target_ids(t) for t in targets[lo : lo + step]]
            scores.extend(self.score_encoded(collate(encoded, ids, pad_token_id=self.pad_token_id)))
        return scores

    def score_encoded(self, batch: EncodedBatch) -> list[float]:
        """Scores of an already collated batch (each row's ``target_ranges`` entry is scored)."""
        logprobs = self.target_logprobs(batch)
        return [float(lp.mean()) if lp.numel() else float("nan") for lp in logprobs]

    def target_logprobs(self, batch: EncodedBatch, *, grad: bool = False) -> list[torch.Tensor]:
        """Per row, ``(n_target,)`` float32 log-probabilities of the target tokens (teacher forcing).

        Token at position ``p`` is predicted by the logits at ``p - 1``. Only logits from the earliest
        target position on are computed (``logits_to_keep``). With ``grad=True`` gradients flow (adapter
        training) and the vision cache is bypassed.
        """
        torch = require("torch", purpose="TransformersPolicy.score")
        width = int(batch.input_ids.shape[1])
        first = min((s for s, e in batch.target_ranges if e > s), default=width)
        keep = width - (first - 1)
        grad_ctx = contextlib.nullcontext() if grad else torch.inference_mode()
        with grad_ctx, self.forward_context(batch):
            out = self.model(**self.model_inputs(batch, grad=grad), use_cache=False, logits_to_keep=keep)
        logp = torch.log_softmax(
            out.logits.float(), dim=-1
        )  # (batch, keep, vocab); column c is position width-keep+c
        offset = width - keep
        ids = batch.input_ids.to(logp.device)
        result = []
        for row, (start, end) in enumerate(batch.target_ranges):
            positions = torch.arange(start, end, device=logp.device)
            result.append(logp[row, positions - 1 - offset].gather(-1, ids[row, positions, None])[:, 0])
        return result


def policy_from_config(config: PolicyConfig) -> TransformersPolicy:
    """The runtime registered as ``transformers`` (:mod:`causalcache_memory.runtime.registry`)."""
    cfg = config.transformers
    if cfg is None:  # pragma: no cover - PolicyConfig refuses this
        raise ConfigError("policy.kind is 'transformers' but the policy.transformers section is missing")
    return TransformersPolicy.from_pretrained(
        cfg.model_path,
        device=cfg.device,
        dtype=None if cfg.dtype == "auto" else cfg.dtype,
        max_new_tokens=cfg.max_new_tokens,
        platform=config.platform,
        adapter=cfg.adapter_path,
        vision_cache_mb=cfg.vision_cache_mb,
    )
