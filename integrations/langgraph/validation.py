"""Argument checks and stand-ins of :class:`CausalCacheMemory` (validated at construction, never late)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, get_args

from causalcache_memory.actions.coords import CoordMode
from causalcache_memory.allocation.base import AllocationContext, Allocator
from causalcache_memory.allocation.registry import available_allocators, build_allocator
from causalcache_memory.config import CausalCacheConfig, parse_config
from causalcache_memory.errors import CausalCacheError, ConfigError, PolicyError

if TYPE_CHECKING:
    from causalcache_memory.allocation.base import Allocation
    from causalcache_memory.integrations.langgraph.policies import ActionParser

__all__ = [
    "COORD_MODES",
    "UnavailableAllocator",
    "check_allocator",
    "check_arguments",
    "check_coords",
    "check_object",
    "memory_config",
]


class UnavailableAllocator:
    """Stands in for an allocator that could not be built: every step falls back to Recent-B."""

    uses_witness = True

    def __init__(self, name: str, error: Exception) -> None:
        self.name = name
        self.error = error

    def warmup(self) -> None:
        """Nothing to load (the build error was warned about once; each step warns as it falls back)."""

    def allocate(self, ctx: AllocationContext) -> Allocation:
        raise PolicyError(f"could not be built: {type(self.error).__name__}: {self.error}") from self.error


COORD_MODES: tuple[str, ...] = get_args(CoordMode)


def check_allocator(value: Any) -> Allocator:
    """An allocator object, or a registered name built now; anything else is refused at once."""
    if isinstance(value, str):
        try:
            return build_allocator(value)
        except CausalCacheError as exc:
            raise ConfigError(
                f"CausalCacheMemory(allocation={value!r}): {exc}. Registered names: "
                f"{', '.join(available_allocators())}"
            ) from exc
    missing = [a for a in ("name", "uses_witness", "allocate") if not hasattr(value, a)]
    if missing:
        raise ConfigError(
            f"CausalCacheMemory(allocation={value!r}): not an Allocator (missing {', '.join(missing)}); "
            f"pass an allocator object or a registered name ({', '.join(available_allocators())})"
        )
    return value


def check_coords(coords: Any) -> None:
    """Refuse a coordinate convention that is not one of :data:`COORD_MODES`, naming them."""
    if coords not in COORD_MODES:
        raise ConfigError(
            f"CausalCacheMemory(coords={coords!r}): use one of {', '.join(COORD_MODES)} (auto reads "
            "[0, 1] floats as relative, values on the screen as pixels, else the 0-1000 grid)"
        )


def check_object(name: str, value: Any, methods: tuple[str, ...], hint: str) -> None:
    missing = [m for m in methods if not callable(getattr(value, m, None))]
    if value is not None and missing:
        raise ConfigError(f"CausalCacheMemory({name}={value!r}): has no {', '.join(missing)}(); {hint}")


def memory_config(
    config: CausalCacheConfig | None, budget: int | None, dedupe: bool | None
) -> CausalCacheConfig:
    """``config`` (default config) with the constructor's overrides, validated like the YAML."""
    config = config or CausalCacheConfig()
    if not isinstance(config, CausalCacheConfig):
        raise ConfigError(f"config must be a CausalCacheConfig, got {type(config).__name__}")
    data = config.model_dump()
    if budget is not None:
        data["budget"] = budget
    if dedupe is not None:
        data["render"] = {**data["render"], "dedupe_current_screen": bool(dedupe)}
    return config if data == config.model_dump() else parse_config(data, source="CausalCacheMemory")


def check_arguments(keys: Mapping[str, Any], parse: ActionParser | None) -> None:
    """Refuse an empty or non-string state key, and a ``parse`` hook that is not callable."""
    for key, value in keys.items():
        if not isinstance(value, str) or not value:
            raise ConfigError(f"CausalCacheMemory({key}={value!r}): must be a non-empty state key")
    if parse is not None and not callable(parse):
        raise ConfigError(f"CausalCacheMemory(parse={parse!r}): must be a function reply -> Action")
