"""Screen-text encoding and its cache (``selector/screen_text.py``), on values worked out by hand (issue 52)."""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from causalcache_memory.errors import ArchiveError
from causalcache_memory.selector.screen_text import (
    SHAPE_BUCKETS,
    SHAPE_WIDTH,
    TEXT_BUCKETS,
    TEXT_WIDTH,
    ScreenTextCache,
    archive_screen_text,
    encode_text,
    goal_names,
    label_at,
    shape_ids,
    value_shape,
    value_tokens,
    word_ids,
)


def test_bucket_constants() -> None:
    assert (TEXT_BUCKETS, TEXT_WIDTH, SHAPE_BUCKETS, SHAPE_WIDTH) == (1024, 96, 64, 16)


def test_word_ids_are_sorted_distinct_crc32_buckets_padded_with_the_bucket_count() -> None:
    ids = word_ids({"save", "notes"})
    expected = sorted({zlib.crc32(b"save") % 1024, zlib.crc32(b"notes") % 1024})
    assert ids.dtype == np.int32 and ids.shape == (96,)
    assert ids[:2].tolist() == expected and (ids[2:] == 1024).all()
    many = word_ids({f"w{i}" for i in range(300)})
    assert (many < 1024).all() and (np.diff(many) > 0).all()  # cut to the 96 smallest distinct buckets
    shapes = shape_ids({"99"})
    assert shapes.shape == (16,) and shapes[0] == zlib.crc32(b"99") % 64 and (shapes[1:] == 64).all()


def test_value_shape_maps_digits_upper_and_lower_case() -> None:
    assert value_shape("Tk-37x") == "Aa-99a" and value_shape("#$ 0") == "#$ 9"


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("(12)", ["12"]),
        ("'B7',", ["B7"]),
        ("#$42", ["42"]),  # leading '#' and '$' characters, in any order
        ("$#42", ["42"]),
        ("[ab1]", ["ab1"]),
        ("abc", []),
        ("!", []),
    ],
)
def test_value_tokens_strip_punctuation_and_a_leading_hash_or_dollar(text, tokens) -> None:
    assert value_tokens(text) == tokens


def test_goal_names_skip_words_that_start_a_sentence() -> None:
    goal = "Open Notes. Then write Milk in List! Buy Eggs? Ask Bob and alice"
    assert goal_names(goal) == {"notes", "milk", "list", "eggs", "bob"}
    assert goal_names("open the Shop app") == {"shop"} and goal_names("") == set()
    assert goal_names("ID and NASA are not names") == set()  # capitalised words only, not acronyms


def test_encode_text_counts_words_values_shapes_and_lines() -> None:
    blob = encode_text("Order #12 B7\n\n  \nTotal 12\nnothing")
    assert blob.n_words == len({"order", "12", "b7", "total", "nothing"})
    assert blob.n_values == 2  # "12" (twice) and "B7"
    assert blob.line_words == (
        frozenset({"order", "12", "b7"}),
        frozenset({"total", "12"}),
        frozenset({"nothing"}),
    )
    twelve, b7 = zlib.crc32(b"12") % 1024, zlib.crc32(b"b7") % 1024
    assert blob.line_values == (frozenset({twelve, b7}), frozenset({twelve}), frozenset())
    assert sorted(blob.values[:2].tolist()) == sorted([twelve, b7]) and (blob.values[2:] == 1024).all()
    shapes = {zlib.crc32(b"99") % 64, zlib.crc32(b"A9") % 64}
    assert set(blob.shapes[blob.shapes < 64].tolist()) == shapes
    empty = encode_text("")
    assert (empty.n_words, empty.n_values, empty.line_words) == (0, 0, ())


def test_values_are_matched_case_insensitively_but_shaped_as_written() -> None:
    upper, lower = encode_text("B7"), encode_text("b7")
    assert upper.values.tolist() == lower.values.tolist()
    assert upper.shapes.tolist() != lower.shapes.tolist()  # A9 and a9


LINES = [
    ("Name", (0.125, 0.125, 0.25, 0.25)),
    ("Save", (0.75, 0.125, 0.875, 0.25)),
    ("Below", (0.125, 0.375, 0.875, 0.5)),
]


@pytest.mark.parametrize(
    ("x", "y", "label"),
    [
        (0.2, 0.2, "Name"),  # inside
        (0.125, 0.125, "Name"),  # on the box's corner
        (0.875, 0.25, "Save"),
        (0.625, 0.2, "Save"),  # 0.125 from Save's left edge, 0.375 from Name's right edge
        (0.375, 0.2, "Name"),
        (0.5, 0.2, "Name"),  # 0.25 from both: the first line wins a tie
        (0.0, 0.4, "Below"),  # left of the only box on its row
        (0.5, 0.3, None),  # no line on that row
        (0.5, 0.75, None),
    ],
)
def test_label_at_is_the_box_under_the_point_else_the_nearest_on_its_row(x, y, label) -> None:
    assert label_at(LINES, x, y) == label


class _Source:
    def __init__(
        self, texts: dict[str, str | None], lines: dict | None = None, error: Exception | None = None
    ):
        self.texts, self.lines_by_sha, self.error, self.reads, self.line_reads = texts, lines, error, 0, 0
        if lines is not None:
            self.get_lines = self._get_lines

    def get_text(self, sha: str) -> str | None:
        self.reads += 1
        if self.error is not None:
            raise self.error
        return self.texts.get(sha)

    def _get_lines(self, sha: str):  # type: ignore[no-untyped-def]
        self.line_reads += 1
        if self.error is not None:
            raise self.error
        return self.lines_by_sha.get(sha)


def test_the_cache_reads_each_known_text_once_and_unknown_text_every_time() -> None:
    src = _Source({"a": "Save", "b": None})
    cache = ScreenTextCache(src)
    assert cache.get(None) is None and src.reads == 0
    first = cache.get("a")
    assert cache.get("a") is first and src.reads == 1
    assert cache.get("b") is None and cache.get("b") is None and src.reads == 3  # not cached


def test_the_cache_evicts_the_least_recently_used_beyond_its_size() -> None:
    src = _Source({k: k for k in "abc"})
    cache = ScreenTextCache(src, maxsize=2)
    cache.get("a"), cache.get("b"), cache.get("a")  # a is now the most recent
    cache.get("c")  # evicts b
    reads = src.reads
    cache.get("a"), cache.get("c")
    assert src.reads == reads
    cache.get("b")
    assert src.reads == reads + 1


@pytest.mark.parametrize("error", [ArchiveError("gone"), OSError("io"), KeyError("k"), ValueError("v")])
def test_an_unreadable_text_only_masks_the_features(error) -> None:
    cache = ScreenTextCache(_Source({}, lines={}, error=error))
    assert cache.get("a") is None and cache.lines("a") is None


def test_an_unexpected_error_is_not_swallowed() -> None:
    with pytest.raises(RuntimeError):
        ScreenTextCache(_Source({}, error=RuntimeError("bug"))).get("a")


def test_the_cache_reads_lines_once_as_floats_and_none_without_a_getter() -> None:
    src = _Source({}, lines={"a": [("Save", (0, 1, 1, 1))], "b": None})
    cache = ScreenTextCache(src, maxsize=1)
    assert cache.lines("a") == (("Save", (0.0, 1.0, 1.0, 1.0)),)
    assert cache.lines("a") == (("Save", (0.0, 1.0, 1.0, 1.0)),) and src.line_reads == 1
    assert cache.lines("b") is None and cache.lines(None) is None
    assert isinstance(cache.lines("a")[0][1][0], float)
    src.lines_by_sha["c"] = [("X", (0, 0, 1, 1))]
    cache.lines("c")  # maxsize 1: evicts a
    before = src.line_reads
    cache.lines("a")
    assert src.line_reads == before + 1
    assert ScreenTextCache(_Source({"a": "x"})).lines("a") is None


def test_archive_screen_text_is_the_archive_when_it_answers_get_text() -> None:
    src = _Source({})
    assert archive_screen_text(src) is src
    assert archive_screen_text(object()) is None

    class NotCallable:
        get_text = "text"

    assert archive_screen_text(NotCallable()) is None


def test_the_caches_hold_up_to_maxsize_entries_default_4096() -> None:
    assert ScreenTextCache(_Source({})).maxsize == 4096
    src = _Source({k: k for k in "abc"}, lines={k: [(k, (0, 0, 1, 1))] for k in "abc"})
    cache = ScreenTextCache(src, maxsize=3)
    for key in "abc":
        cache.get(key), cache.lines(key)
    for key in "abc":  # all three kept: below and at the bound nothing is evicted
        cache.get(key), cache.lines(key)
    assert (src.reads, src.line_reads) == (3, 3)


@pytest.mark.parametrize(
    ("lines", "x", "label"),
    [
        # a panel holding the point beats a narrower box on the row whose edge is nearer
        ([("Button", (0.3, 0.0, 0.45, 1.0)), ("Panel", (0.0, 0.0, 1.0, 1.0))], 0.5, "Panel"),
        ([("Left", (0.0, 0.0, 0.3, 1.0)), ("Right", (0.6, 0.0, 0.8, 1.0))], 0.5, "Right"),  # 0.1 vs 0.2
        ([("Near", (0.1, 0.0, 0.2, 1.0)), ("Far", (0.5, 0.0, 0.7, 1.0))], 0.9, "Far"),  # 0.7 vs 0.2
    ],
)
def test_label_at_measures_the_distance_to_the_nearer_edge(lines, x, label) -> None:
    assert label_at(lines, x, 0.5) == label


def test_the_source_protocol_is_runtime_checkable_and_a_blob_is_frozen() -> None:
    import dataclasses

    from causalcache_memory.selector.screen_text import ScreenTextSource

    assert isinstance(_Source({}), ScreenTextSource) and not isinstance(object(), ScreenTextSource)
    blob = encode_text("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        blob.n_words = 3  # type: ignore[misc]
