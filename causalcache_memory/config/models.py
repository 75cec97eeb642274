"""Validated configuration models (pydantic v2, ``extra="forbid"``).

One :class:`CausalCacheConfig` configures the memory (budget, allocator, archive, rendering),
the policy runtime and the LangGraph checkpointer. Load it from YAML with
:func:`causalcache_memory.config.load_config`; print the JSON schema with ``causalcache config schema``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from causalcache_memory.allocation.base import check_budget
from causalcache_memory.allocation.registry import lookup_allocator
from causalcache_memory.config.strict import _registered, _Strict
from causalcache_memory.decision_stats import (
    DEFAULT_MAX_FALLBACK_SHARE,
    DEFAULT_MISSING_TEXT_SHARE,
    DEFAULT_NO_SWAP_WINDOW,
    DEFAULT_WINDOW,
)
from causalcache_memory.render.prompt import DEFAULT_SYSTEM_PROMPT
from causalcache_memory.selector.threshold import DEFAULT_BUDGET_WINDOW

__all__ = [
    "AllocationConfig",
    "ArchiveConfig",
    "CausalCacheConfig",
    "CheckpointConfig",
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
        description="Screenshots waiting for OCR at most; newer ones get no text (logged once).",
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


class SelectorConfig(_Strict):
    model_path: str | None = Field(
        None,
        description="Directory or .onnx file of a trained selector; null = the scorer bundled with the package.",
    )
    beam_width: int = Field(4, ge=1, le=64, description="Beam width of the exact-B search.")
    timeout_ms: float = Field(
        250.0,
        gt=0,
        description="Allocation time limit; past it the step falls back to Recent-B with a warning.",
    )
    inverted: bool = Field(False, description="Negate the learned score (specificity control, not for use).")
    min_gain: float | Literal["auto"] = Field(
        "auto",
        description="Smallest predicted gain for a swap: 'auto' = the threshold calibrated on development "
        "data and stored in the model (docs/SELECTOR.md); 0 = the paper's rule (every positive gain); "
        "larger = fewer second passes.",
    )
    second_pass_budget: float = Field(
        0.15,
        description="With min_gain: auto, the largest share of decisions that may run pass 2, in [0, 1]: "
        "the threshold is the one with the most dev gain within it, chosen from the frontier stored in "
        "the model (docs/SELECTOR.md); a number in min_gain overrides it.",
    )
    budget_window: int | None = Field(
        DEFAULT_BUDGET_WINDOW,
        description="With min_gain: auto, hold second_pass_budget on the memory's own latest this-many "
        "decisions per B (dev threshold for the first min(window, 20)); null = the dev threshold only "
        "(docs/SELECTOR.md, 'The pass-2 budget on your screens').",
    )
    ood_guard: bool = Field(
        True,
        description="Fall back to Recent-B (reason 'ood' in the decision log) on states outside the "
        "scorer's training distribution (models exported with OOD statistics).",
    )
    ood_scale: float = Field(
        1.0, gt=0.0, le=1e6, description="Multiplier of the model's OOD distance threshold (>1 = permissive)."
    )

    @field_validator("second_pass_budget", mode="before")
    @classmethod
    def _budget(cls, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise ValueError(
                f"second_pass_budget={value!r} must be a share of decisions in [0, 1], e.g. 0.15 (at most "
                "15% of decisions run pass 2); 1 = no budget limit, or set min_gain to a number instead"
            )
        return float(value)

    @field_validator("budget_window", mode="before")
    @classmethod
    def _window(cls, value: Any) -> Any:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(
                f"budget_window={value!r} must be an integer >= 1 (decisions over which the pass-2 budget "
                "is held on the deployment, e.g. 200) or null (the dev-calibrated threshold only)"
            )
        return value

    @field_validator("min_gain", mode="before")
    @classmethod
    def _min_gain_not_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            raise ValueError(f"min_gain={value!r} must be 'auto' or a number >= 0, not a boolean")
        return value

    @field_validator("min_gain")
    @classmethod
    def _min_gain(cls, value: float | str) -> float | str:
        if isinstance(value, str) or (value >= 0.0 and value < float("inf")):
            return value
        raise ValueError(f"min_gain={value!r} must be 'auto' or a finite number >= 0 (0 = the paper's rule)")


class IdleWarningConfig(_Strict):
    """When the memory warns that its allocator is idle (docs/SELECTOR.md, "When the selector is idle")."""

    enabled: bool = Field(True, description="Warn (once per memory) when the allocator mostly falls back.")
    window: int = Field(DEFAULT_WINDOW, description="How many of the latest decisions where a swap was possible "
        "(some past step outside Recent-B) the rule looks at, 1..100000.")  # fmt: skip
    no_swap_window: int | None = Field(
        DEFAULT_NO_SWAP_WINDOW, ge=1, le=100_000, description="Also warn after this many could-swap decisions "
        "without a single swap (the selector ran but never cleared its threshold), 1..100000; null: never.",
    )  # fmt: skip
    max_fallback_share: float = Field(
        DEFAULT_MAX_FALLBACK_SHARE,
        description="Warn when more than this share of them fell back to Recent-B (OOD, time-out, error, "
        "...), 0 <= share < 1; to never warn set enabled: false.",
    )
    missing_text_share: float | None = Field(
        DEFAULT_MISSING_TEXT_SHARE,
        description="Also warn when screen text was missing on more than this share of them while the "
        "selector reads screen text (give it screen_text or archive.ocr), 0 <= share < 1; null: never.",
    )

    @field_validator("window")
    @classmethod
    def _window(cls, value: int) -> int:
        if not 1 <= value <= 100_000:
            raise ValueError(
                f"window={value!r} must be an integer between 1 and 100000 (decisions); set e.g. window: 20"
            )
        return value

    @field_validator("max_fallback_share")
    @classmethod
    def _share(cls, value: float) -> float:
        if not 0.0 <= value < 1.0:
            raise ValueError(
                f"max_fallback_share={value!r} must be a share in [0, 1), e.g. 0.5 (warn above 50%); "
                "to never warn set enabled: false"
            )
        return value

    @field_validator("missing_text_share")
    @classmethod
    def _text_share(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value < 1.0:
            raise ValueError(
                f"missing_text_share={value!r} must be a share in [0, 1), e.g. 0.5 (warn when screen text "
                "is missing on more than half of the decisions); null: never warn about screen text"
            )
        return value


class ExploreConfig(_Strict):
    """Record a share of episodes with another allocator (allocation/explore.py, docs/LEARN.md "Record")."""

    share: float = Field(
        ..., gt=0.0, le=1.0, description="Share of episodes (stable per episode id), 0 < share <= 1."
    )
    allocator: str = Field("random", description="The exploring allocator: any registered name but selector.")
    seed: int = Field(0, description="Seed of the per-episode choice and of a random explorer.")

    @field_validator("allocator")
    @classmethod
    def _explorer(cls, name: str) -> str:
        if name == "selector":
            raise ValueError("the selector is not an explorer: use random (or deploy it with min_gain: 0)")
        return _registered(lookup_allocator, name)


class AllocationConfig(_Strict):
    allocator: str = Field(
        "selector",
        description="Which events get the B high-fidelity slots: any registered allocator "
        "(selector = the learned selector, recent, summary_only, random, first, evenly_spaced, rgb, or one "
        "added with register_allocator).",
    )

    @field_validator("allocator")
    @classmethod
    def _known_allocator(cls, name: str) -> str:
        return _registered(lookup_allocator, name)

    seed: int = Field(0, description="Seed of the random allocator.")
    rgb_size: int = Field(32, ge=4, le=256, description="Thumbnail side of the RGB-similarity allocator.")
    selector: SelectorConfig = SelectorConfig()
    idle_warning: IdleWarningConfig = IdleWarningConfig()
    explore: ExploreConfig | None = Field(None, description="Exploration while recording; null = never.")


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
