"""Validated configuration models (pydantic v2, ``extra="forbid"``).

One :class:`CausalCacheConfig` configures the memory (budget, allocator, archive, rendering),
the policy runtime and the LangGraph checkpointer. Load it from YAML with
:func:`causalcache_memory.config.load_config`; print the JSON schema with ``causalcache config schema``.
"""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from causalcache_memory.allocation.base import check_budget
from causalcache_memory.config.allocation import (
    AllocationConfig,
    CompareConfig,
    ExploreConfig,
    IdleWarningConfig,
    SelectorConfig,
)
from causalcache_memory.config.strict import _registered, _Strict
from causalcache_memory.errors import CausalCacheWarning
from causalcache_memory.render.prompt import DEFAULT_SYSTEM_PROMPT

__all__ = [
    "AllocationConfig",
    "ArchiveConfig",
    "CausalCacheConfig",
    "CheckpointConfig",
    "CompareConfig",
    "ExploreConfig",
    "IdleWarningConfig",
    "OcrConfig",
    "OpenAIPolicyConfig",
    "PolicyConfig",
    "RenderConfig",
    "SGLangPolicyConfig",
    "SelectorConfig",
    "SimulatedPolicyConfig",
    "TransformersPolicyConfig",
]


class OcrConfig(_Strict):
    engine: Literal["none", "rapidocr", "tesseract"] = Field(
        "none",
        description="OCR of screenshots that arrive without screen_text, run in the background at archive "
        "time (never on the decision path) and stored beside the blob: 'rapidocr' (extra "
        "causalcache-memory[ocr], models ship in the wheel), 'tesseract' (Debian tesseract-ocr + pytesseract), "
        "'none' (default: no OCR; the selector's text features are masked for screens without text).",
    )
    languages: str = Field(
        "eng",
        min_length=1,
        description="Tesseract language codes joined by '+' (e.g. 'eng+deu'); rapidocr ignores it.",
    )
    threads: int = Field(
        1,
        ge=1,
        le=64,
        description="CPU threads of one rapidocr call (one screenshot at a time); tesseract follows OMP_THREAD_LIMIT.",
    )
    max_pending: int = Field(
        32,
        ge=1,
        le=4096,
        description="Screenshots waiting for OCR at most; the queue is served newest first and, when full, "
        "drops the oldest waiting screenshot (counted in screen_text_stats(), logged once).",
    )
    close_timeout_s: float = Field(
        10.0,
        ge=0,
        le=3600,
        description="close() asks a running OCR read to stop and waits at most this many seconds for it; a "
        "read still running then is abandoned on its daemon thread (logged as a WARNING).",
    )
    incremental: bool = Field(
        True,
        description="Read only the regions that changed since the previous screen of the same thread, "
        "carrying the other lines over with their boxes (a full read when too much changed).",
    )
    full_read_share: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Incremental reads fall back to a full read when the changed regions cover more than "
        "this share of the screen.",
    )
    det_side: int = Field(
        960,
        ge=0,
        le=8192,
        description="rapidocr: longest side in pixels of the image text detection runs on (the screen is "
        "scaled down to it; recognition reads full-resolution crops); 0 = full resolution.",
    )
    rec_batch: int = Field(
        4, ge=1, le=64, description="rapidocr: text crops per recognition batch (sorted by aspect ratio)."
    )


class ArchiveConfig(_Strict):
    url: str = Field(
        ".causalcache/archive",
        description="Local directory or fsspec URL (memory://, s3://bucket/prefix, ...) of the screenshot archive.",
    )
    cache_dir: str | None = Field(
        None,
        description="Local write-through cache of an object-store archive (writes still return only once "
        "stored in the shared archive; reads of recent screenshots stay local). null = no cache.",
    )
    max_pixels: int = Field(40_000_000, gt=0, description="Largest accepted image (width*height).")
    formats: tuple[Literal["png", "jpeg", "webp"], ...] = Field(
        ("png", "jpeg", "webp"), min_length=1, description="Accepted encoded image formats."
    )
    timeout_s: float | None = Field(
        60.0,
        gt=0,
        le=86_400,
        description="Deadline in seconds of each call to an object-store archive (s3://, gs://, ...): a "
        "storage that does not answer in time raises ArchiveTimeoutError. null = no deadline. Local "
        "directories have none.",
    )
    ocr: OcrConfig = Field(
        OcrConfig(), description="OCR fallback for screenshots without screen_text (docs/LANGGRAPH.md)."
    )
    namespace_keys: tuple[str, ...] = Field(
        (),
        description="Keys of LangGraph's config['configurable'] naming the tenant (e.g. [tenant_id]): each "
        "run's screenshots and trace go to the archive's tenants/<value> sub-archive, and a run without "
        "the keys is refused. Empty = one shared archive.",
    )

    @field_validator("namespace_keys")
    @classmethod
    def _namespace_keys(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any(not key or key == "thread_id" for key in value) or len(set(value)) != len(value):
            raise ValueError(
                f"namespace_keys={list(value)!r}: give distinct, non-empty configurable keys other than "
                "thread_id (the thread is already the episode inside a namespace)"
            )
        return value


class RenderConfig(_Strict):
    system_prompt: str = Field(DEFAULT_SYSTEM_PROMPT, min_length=1)
    history_header: str = "Action history (every past step):"
    retained_header: str = Field("Screen after step {index}:", description="May use {index}.")
    current_header: str = "Current screen:"
    request: str = "What is the next action?"
    dedupe_current_screen: bool = Field(
        False,
        description="Send the current screen once when a retained screenshot is byte-identical to it "
        "(off = the paper's prompt; keep off with HGKV).",
    )
    layout: Literal["retained_turns", "cache_friendly", "conversation"] = Field(
        "retained_turns",
        description="retained_turns: the paper's order; cache_friendly: retained turns before the "
        "append-only summaries, so a provider's prefix cache keeps them while S holds; conversation: every "
        "event in order, a summary line each and its full turn when retained, the current screen last as "
        "the newest event's screen (docs/PROMPT_COST.md).",
    )

    @field_validator("retained_header")
    @classmethod
    def _check_placeholder(cls, value: str) -> str:
        try:
            value.format(index=1)
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"only the {{index}} placeholder is allowed ({exc})") from exc
        return value


class SimulatedPolicyConfig(_Strict):
    seed: int = 0


class TransformersPolicyConfig(_Strict):
    model_path: str = Field(
        ..., min_length=1, description="Local directory with the model weights (never a hub id)."
    )
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?|mps)$")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"
    adapter_path: str | None = Field(None, description="HGKV / ungated adapter directory (optional).")
    max_new_tokens: int = Field(256, ge=1, le=8192)
    vision_cache_mb: int = Field(
        512,
        ge=0,
        description="MiB of vision-encoder outputs reused across forwards (each distinct image encoded "
        "once); 0 turns the cache off.",
    )


class SGLangPolicyConfig(_Strict):
    urls: tuple[str, ...] = Field(
        (),
        description="Server base URLs; with several, each episode sticks to one (rendezvous hashing). "
        "Give urls or gateway_url.",
    )
    gateway_url: str | None = Field(
        None,
        pattern=r"^https?://",
        description="SGLang Model Gateway (smg) URL; requests carry the per-episode x-smg-routing-key "
        "header (start smg with --routing-key-override, docs/DEPLOY.md). Give urls or gateway_url.",
    )
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=20)
    max_new_tokens: int = Field(256, ge=1, le=8192)
    max_images_per_prompt: int | None = Field(None, ge=1)

    @field_validator("urls")
    @classmethod
    def _check_urls(cls, urls: tuple[str, ...]) -> tuple[str, ...]:
        bad = [u for u in urls if not u.startswith(("http://", "https://"))]
        if bad:
            raise ValueError(f"URLs must start with http:// or https://, got {bad}")
        return urls

    @model_validator(mode="after")
    def _one_target(self) -> SGLangPolicyConfig:
        if bool(self.urls) == (self.gateway_url is not None):
            raise ValueError(
                f"give exactly one of policy.sglang.urls (servers) or policy.sglang.gateway_url (smg); "
                f"got urls={list(self.urls)!r}, gateway_url={self.gateway_url!r}"
            )
        return self

    def endpoints(self) -> tuple[str, ...]:
        """The URLs the client talks to: the gateway alone, or the servers."""
        return (self.gateway_url,) if self.gateway_url is not None else self.urls


class OpenAIPolicyConfig(_Strict):
    base_url: str = Field(..., pattern=r"^https?://")
    model: str = Field(..., min_length=1)
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(3, ge=0, le=20)
    max_tokens: int = Field(256, ge=1)
    max_images_per_prompt: int | None = Field(None, ge=1)


class PolicyConfig(_Strict):
    kind: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9_-]+$",
        description="Policy runtime (the VLM): a name in the runtime registry (transformers, sglang, "
        "openai; simulated = the synthetic world's CPU stand-in, registered by the lab; or one added with "
        "causalcache_memory.runtime.registry.register_runtime), checked when the policy is built; null = "
        "none configured (the LangGraph integration calls your own model node).",
    )
    platform: Literal["auto", "desktop", "mobile"] = "auto"
    coords: Literal["auto", "absolute", "relative", "thousand"] = Field(
        "auto",
        description="Coordinate convention of the model's actions: auto (floats in [0, 1] relative, values "
        "on the screen pixels, else the 0-1000 grid), absolute (pixels), relative, thousand (0-1000 grid).",
    )
    simulated: SimulatedPolicyConfig = SimulatedPolicyConfig()
    transformers: TransformersPolicyConfig | None = None
    sglang: SGLangPolicyConfig | None = None
    openai: OpenAIPolicyConfig | None = None
    options: dict[str, Any] = Field(
        default_factory=dict, description="Options of a runtime registered with register_runtime."
    )

    @model_validator(mode="after")
    def _section_present(self) -> PolicyConfig:
        if self.kind in _SECTIONED and getattr(self, self.kind) is None:
            raise ValueError(
                f"policy.kind is {self.kind!r} but the policy.{self.kind} section is missing; add it"
            )
        return self


#: built-in runtimes whose options live in a section of their own
_SECTIONED = ("transformers", "sglang", "openai")


class CheckpointConfig(_Strict):
    kind: Literal["sqlite", "memory", "postgres"] = "sqlite"
    path: str = Field(".causalcache/checkpoints.sqlite", description="SQLite file (kind: sqlite).")
    uri: str | None = Field(None, description="PostgreSQL connection URI (kind: postgres).")
    durability: Literal["sync", "async", "exit"] = Field(
        "sync",
        description="Default LangGraph durability of graphs built with memory.compile(): 'sync' = each "
        "step's checkpoint is stored before the next step starts (agents whose actions have side "
        "effects); 'async' = LangGraph's default, the next step may act before the last checkpoint is "
        "stored, so a killed run re-executes more (docs/LANGGRAPH.md, 'Durability').",
    )

    @model_validator(mode="after")
    def _postgres_uri(self) -> CheckpointConfig:
        if self.kind == "postgres" and not self.uri:
            raise ValueError("checkpointer.kind is 'postgres' but checkpointer.uri is not set")
        return self


class CausalCacheConfig(_Strict):
    """Top-level configuration."""

    budget: int = Field(4, description="B: history steps shown at high fidelity (0 = summary-only), 0..64.")
    two_pass: bool = Field(
        True, description="Re-decide with the selector's set when it displaces a recent step."
    )
    allocation: AllocationConfig = AllocationConfig()
    archive: ArchiveConfig = ArchiveConfig()
    render: RenderConfig = RenderConfig()
    policy: PolicyConfig = PolicyConfig()
    checkpointer: CheckpointConfig = CheckpointConfig()

    @field_validator("budget", mode="before")
    @classmethod
    def _one_budget_rule(cls, value: Any) -> int:
        return _registered(check_budget, value)

    @model_validator(mode="after")
    def _selector_needs_a_budget(self) -> CausalCacheConfig:
        if self.budget == 0 and self.allocation.allocator == "selector":
            warnings.warn(
                "budget: 0 shows no past screenshot, so allocation.allocator 'selector' has nothing to "
                "choose (it would still load its model on every memory); set allocation.allocator: recent "
                "for a summary-only memory, or budget: 1 or more for the selector",
                CausalCacheWarning,
                stacklevel=2,
            )
        return self
