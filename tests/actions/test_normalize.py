"""Text and key normalization used by equivalence."""

from __future__ import annotations

import pytest

from causalcache_memory.actions import normalize_key, normalize_keys, normalize_text


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("  Hello   World \n", "hello world"),
        ("hello\\n", "hello"),
        ("Straße", "strasse"),
        ("a\tb\nc", "a b c"),
        (None, ""),
    ],
)
def test_normalize_text(raw, expected: str) -> None:
    assert normalize_text(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("Control", "ctrl"), ("ctrlleft", "ctrl"), ("Command", "cmd"), ("win", "cmd"), ("Return", "enter"),
     ("esc", "escape"), ("option", "alt"), (" ", "space"), ("\n", "enter"), ("F5", "f5")],
)  # fmt: skip
def test_normalize_key(raw: str, expected: str) -> None:
    assert normalize_key(raw) == expected


def test_normalize_keys_is_an_order_free_set() -> None:
    assert normalize_keys(("Shift", "Control", "t")) == normalize_keys(["t", "ctrl", "shiftleft"])
