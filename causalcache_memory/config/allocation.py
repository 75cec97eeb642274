"""The ``allocation`` section of the configuration: allocator, learned selector, idle warning, exploration.

Split from :mod:`causalcache_memory.config.models` (which re-exports every model here) to keep each module
small; :class:`~causalcache_memory.config.models.CausalCacheConfig` holds an :class:`AllocationConfig`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from causalcache_memory.allocation.registry import lookup_allocator
from causalcache_memory.config.strict import _registered, _Strict
from causalcache_memory.decisions.stats import (
    DEFAULT_MAX_FALLBACK_SHARE,
    DEFAULT_MISSING_TEXT_SHARE,
    DEFAULT_NO_SWAP_WINDOW,
    DEFAULT_WINDOW,
)
from causalcache_memory.selector.ood_refit import DEFAULT_REFIT, DEFAULT_REFIT_WARMUP, check_refit_warmup
from causalcache_memory.selector.threshold import DEFAULT_SHARE_WINDOW, check_share, check_window
from causalcache_memory.selector.witness_check import DEFAULT_WITNESS_CHECK

__all__ = [
    "AllocationConfig",
    "CompareConfig",
    "ExploreConfig",
    "IdleWarningConfig",
    "MeanBConfig",
    "PricedConfig",
    "SelectorConfig",
]


class SelectorConfig(_Strict):
    RENAMED: ClassVar[Mapping[str, str]] = {
        "second_pass_budget": "second_pass_share",  # refused by name
        "budget_window": "share_window",  # refused by name
    }

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
    second_pass_share: float = Field(
        0.15,
        description="With min_gain: auto, the largest share of decisions that may run pass 2, in [0, 1]: "
        "the threshold is the one with the most dev gain within it, chosen from the frontier stored in "
        "the model (docs/SELECTOR.md); a number in min_gain overrides it.",
    )
    share_window: int | None = Field(
        DEFAULT_SHARE_WINDOW,
        description="With min_gain: auto, hold second_pass_share on the memory's own latest this-many "
        "decisions per B (dev threshold for the first min(window, 20)); null = the dev threshold only "
        "(docs/SELECTOR.md, 'The pass-2 share on your screens').",
    )
    ood_guard: bool = Field(
        True,
        description="Fall back to Recent-B (reason 'ood' in the decision log) on states outside the "
        "scorer's training distribution (models exported with OOD statistics).",
    )
    ood_scale: float = Field(
        1.0, gt=0.0, le=1e6, description="Multiplier of the model's OOD distance threshold (>1 = permissive)."
    )
    ood_refit: int | None = Field(
        DEFAULT_REFIT,
        ge=30,
        le=1_000_000,
        strict=True,
        description="N (>= 30; default 64) = the guard judges from the N-th featurized decision on, its "
        "center/scale refitted on those N unlabelled states of this deployment; null = the model's OOD guard "
        "on every decision, never refitted (needs ood_refit_warmup: bundled; docs/SELECTOR.md).",
    )
    ood_refit_warmup: Literal["bundled", "open"] = Field(
        DEFAULT_REFIT_WARMUP,
        description="What judges during the refit's warm-up: 'open' (default) = no covariate guard until the "
        "refit, the witness check only (needs ood_refit and witness_check: true); 'bundled' = the model's "
        "guard (docs/SELECTOR.md).",
    )
    witness_check: bool = Field(
        DEFAULT_WITNESS_CHECK,
        description="Refuse a set that evicts a recent screen showing the value the pass-1 proposal types "
        "(the screen it was read from) and search again with that screen kept (docs/SELECTOR.md).",
    )

    @field_validator("second_pass_share", mode="before")
    @classmethod
    def _second_pass_share(cls, value: Any) -> Any:
        return _registered(check_share, value)  # the allocator's own rule (selector/threshold.py)

    @field_validator("share_window", mode="before")
    @classmethod
    def _share_window(cls, value: Any) -> Any:
        return _registered(check_window, value)  # the allocator's own rule (selector/threshold.py)

    @model_validator(mode="after")
    def _refit_warmup(self) -> SelectorConfig:
        _registered(
            lambda v: check_refit_warmup(v, self.ood_refit, self.witness_check), self.ood_refit_warmup
        )
        return self

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
        "without a single swap (the selector ran but never cleared its threshold), and under allocation.compare "
        "after this many with a shadow decision that never differed, 1..100000; null: never.",
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


class CompareConfig(_Strict):
    """Compare the deployed selector with another on live episodes (docs/LEARN.md, "Compare before
    switching"): a stable share of episodes runs ``model_path``; ``causalcache compare`` reports both."""

    share: float = Field(
        ...,
        gt=0.0,
        lt=1.0,
        description="Share of episodes (stable per episode id) run by the compared selector, 0 < share < 1; "
        "0.5 splits evenly (the shortest comparison).",
    )
    model_path: str | None = Field(
        None,
        description="The compared selector: a directory or .onnx file; null = the scorer bundled with the "
        "package (compare a learned selector with the bundle it was fine-tuned from).",
    )
    seed: int = Field(0, description="Seed of the per-episode choice.")
    shadow: bool = Field(
        True,
        description="The selector an episode does not run also decides every step, and its set is recorded "
        "(shadow_selected), so causalcache compare can judge the arms on the episodes where the two "
        "disagreed (about half as many episodes on development worlds); costs a second selector decision "
        "per step.",
    )


class PricedConfig(_Strict):
    """The priced decision (allocation/priced.py, docs/PROMPT_COST.md "A priced decision"): a change of
    ``S`` is taken only when its predicted gain is worth the cached prefix it invalidates."""

    exchange_rate: float = Field(
        30000.0,
        gt=0.0,
        allow_inf_nan=False,
        description="Rewritten (write-equivalent) prompt tokens one unit of predicted gain is worth.",
    )
    recent_value: float = Field(
        0.1, ge=0.0, allow_inf_nan=False, description="Predicted gain of showing one Recent-B event in full."
    )
    hold_steps: int = Field(
        3,
        ge=0,
        description="Steps a restored event stays in S at least; then while the selector scores it above 0.",
    )
    slide_every: int = Field(
        4,
        ge=1,
        description="The window slides once its newest event is this many steps old (1 = every step).",
    )
    image_model: str = Field(
        "qwen2.5-vl", description="Image-token rule: a model of assets/prompt_cost/hosted_models.yaml."
    )
    cache: str | dict[str, Any] = Field(
        "anthropic-claude",
        description="The provider's cache model: a name of the hosted-model table, or a mapping with kind "
        "(breakpoints, automatic, block) and its prices.",
    )

    @model_validator(mode="after")
    def _known_models(self) -> PricedConfig:
        from causalcache_memory.prompt_cost import (
            cache_model_from_dict,
            hosted_cache_model,
            hosted_image_rule,
        )

        try:
            hosted_image_rule(self.image_model)
            hosted_cache_model(self.cache) if isinstance(self.cache, str) else cache_model_from_dict(
                self.cache
            )
        except Exception as exc:  # ConfigError naming the value and the known names
            raise ValueError(f"allocation.priced: {exc}") from exc
        return self


class MeanBConfig(_Strict):
    """The mean-B budget contract (allocation/mean_b.py, docs/PROMPT_COST.md "Mean-B"): the newest event
    is appended at every step and every ``chunk`` steps a batch collapse picks the set again, so ``|S|``
    cycles through ``chunk`` sizes whose mean is at most ``B``."""

    chunk: int = Field(
        3,
        ge=1,
        description="Steps between two batch collapses; |S| cycles from B - chunk//2 to B - chunk//2 + chunk - 1.",
    )


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
    batch_chunk: int = Field(
        2, ge=1, description="Events the recent_batch window moves at a time (1 = recent)."
    )
    priced: PricedConfig | None = Field(
        None, description="Price each change of S by the cached prefix it invalidates; null = never."
    )
    mean_b: MeanBConfig | None = Field(
        None,
        description="The mean-B budget contract (newest events appended, a batch collapse every chunk "
        "steps); null = exact-B. With priced, a swap between collapses is priced.",
    )
    selector: SelectorConfig = SelectorConfig()
    idle_warning: IdleWarningConfig = IdleWarningConfig()
    explore: ExploreConfig | None = Field(None, description="Exploration while recording; null = never.")
    compare: CompareConfig | None = Field(
        None, description="Run a share of episodes with another selector, to compare the two; null = never."
    )

    @model_validator(mode="after")
    def _compare_selectors(self) -> AllocationConfig:
        if self.compare is not None and self.allocator != "selector":
            raise ValueError(
                f"allocation.compare compares two learned selectors, but allocation.allocator is "
                f"{self.allocator!r}: set allocator: selector or remove allocation.compare"
            )
        if self.compare is not None and self.explore is not None:
            raise ValueError(
                "allocation.compare and allocation.explore both route a share of episodes to another "
                "allocator: record with explore, or compare two selectors, not both at once"
            )
        return self
