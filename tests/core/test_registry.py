"""One registry pattern: register / available / lookup, and an error naming the field, the value, the names."""

from __future__ import annotations

import pytest

from causalcache_memory.allocation.registry import ALLOCATORS, build_allocator
from causalcache_memory.config import parse_config
from causalcache_memory.errors import AllocationError, ConfigError
from causalcache_memory.registry import Registry


def test_register_available_lookup() -> None:
    reg: Registry[int] = Registry("widget", field="widgets.kind", register_with="register_widget")
    reg.register("b", 2)
    reg.register("a-1", 1)
    assert reg.available() == ["a-1", "b"] and list(reg) == ["a-1", "b"] and len(reg) == 2
    assert reg.lookup("b") == 2 and "b" in reg and "c" not in reg
    with pytest.raises(ConfigError) as info:
        reg.lookup("c")
    assert str(info.value) == (
        "widgets.kind='c' is not a registered widget; registered: a-1, b (register your own with register_widget)"
    )
    with pytest.raises(ConfigError, match="already registered"):
        reg.register("b", 3)
    reg.register("b", 3, overwrite=True)
    assert reg.lookup("b") == 3
    for bad in ("", "a b", "x.y", 7):
        with pytest.raises(ConfigError, match="non-empty identifier"):
            reg.register(bad, 0)  # type: ignore[arg-type]


def test_copy_is_independent() -> None:
    reg: Registry[int] = Registry("widget", field="w", register_with="r")
    reg.register("a", 1)
    other = reg.copy()
    other.register("b", 2)
    assert reg.available() == ["a"] and other.available() == ["a", "b"]


def test_a_renamed_allocator_name_is_refused_with_the_new_name() -> None:
    # the learned selector's registry key is `selector`; the development name is an error, not an alias
    assert "selector" in ALLOCATORS and "causalcache" not in ALLOCATORS
    with pytest.raises(AllocationError, match=r"'causalcache' is now called 'selector'"):
        build_allocator("causalcache")
    with pytest.raises(ConfigError) as info:
        parse_config({"allocation": {"allocator": "causalcache"}})
    assert "allocation.allocator" in str(info.value) and "set allocation.allocator: selector" in str(
        info.value
    )
