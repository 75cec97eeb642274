"""Rules of the screen-text encoding and columns, each checked on values written out by hand (issue 52).

The escaped bugs these pin: ``text_current_jaccard`` without subtracting the intersection (identical
screens scored 0.5), and value tokens that needed more than two characters (``12``, ``B7`` lost).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from named_texts import NamedTexts, sha_of

from causalcache_memory.actions import Action
from causalcache_memory.selector.features import FeatureExtractor, feature_index
from causalcache_memory.selector.screen_text import encode_text, value_tokens
from causalcache_memory.trace import Trace

_sha = sha_of


_Texts = NamedTexts


def _row(texts: dict[str, str], screens: list[str], goal: str = "Find the note") -> np.ndarray:
    """Feature rows of a trace whose events end on ``screens`` (the last one is the current screen)."""
    trace = Trace(goal, episode_id="rules")
    trace.observe(_sha("start"))
    for i, name in enumerate(screens):
        trace.record(Action("click", x=0.5, y=0.1 * (i + 1)), f"r{i}", _sha(name), summary=f"click {i}")
    return FeatureExtractor(screen_text=_Texts(texts))(trace, 2, None)


def _distinct_buckets(words: set[str]) -> None:
    """Precondition of the hand values: the words fall in distinct text buckets (crc32 mod 1024)."""
    assert len({zlib.crc32(w.encode()) % 1024 for w in words}) == len(words)


JAC = feature_index("text_current_jaccard")
ON_CURRENT = feature_index("text_value_on_current")
VALUES_LOG = feature_index("text_values_log")


def test_identical_screens_have_text_current_jaccard_one() -> None:
    texts = {"a": "Notes\nQuick note\nSave", "b": "Notes\nQuick note\nSave"}
    rows = _row(texts, ["a", "b"])  # v_1 = a, current x_3 = v_2 = b: the same words
    assert rows[0, JAC] == pytest.approx(1.0) and rows[1, JAC] == pytest.approx(1.0)


def test_text_current_jaccard_is_intersection_over_union_of_distinct_words() -> None:
    words_a, words_cur = {"notes", "quick", "note", "save"}, {"notes", "save", "cancel"}
    _distinct_buckets(words_a | words_cur)
    rows = _row({"a": "Notes\nQuick note\nSave", "cur": "Notes\nSave\nCancel"}, ["a", "cur"])
    # |{notes, save}| / |{notes, quick, note, save, cancel}| = 2 / 5
    assert rows[0, JAC] == pytest.approx(2 / 5)


def test_a_screen_sharing_no_word_with_the_current_one_has_jaccard_zero() -> None:
    _distinct_buckets({"alpha", "beta", "gamma", "delta"})
    rows = _row({"a": "alpha beta", "cur": "gamma delta"}, ["a", "cur"])
    assert rows[0, JAC] == 0.0 and rows[1, JAC] == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Room 12", ["12"]),
        ("Seat B7", ["B7"]),
        ("Total #42.", ["42"]),
        ("Price $9", []),  # one character after stripping '$': not a value
        ("Floor 3", []),  # one character
        ("Code TK-3781 and 7 and 99", ["TK-3781", "99"]),
    ],
)
def test_value_tokens_keep_two_character_values_and_drop_one_character_ones(text, tokens) -> None:
    assert value_tokens(text) == tokens


def test_two_character_values_count_in_a_screens_values() -> None:
    assert encode_text("Room 12\nSeat B7").n_values == 2
    assert encode_text("Room 1\nSeat 7").n_values == 0


def test_a_two_character_value_shown_on_the_current_screen_counts_as_on_current() -> None:
    rows = _row({"a": "Room 12\nSeat B7", "cur": "Your seat B7"}, ["a", "cur"])
    assert rows[0, ON_CURRENT] == pytest.approx(1 / 2)  # B7 of {12, B7} is on the current screen
    assert rows[0, VALUES_LOG] == pytest.approx(np.log1p(2) / np.log(10.0))
    assert rows[1, VALUES_LOG] == pytest.approx(np.log1p(1) / np.log(10.0))  # "B7" alone
