"""Screen text that arrives late, and the retry rule (``selector/text_features.py``), on hand values (issue 52).

An event whose text was unknown when first featurized is read again on later decisions, the newest
:data:`RETRY` (8) such events per decision; its novelty is then computed against every earlier screen,
while later events keep the novelty they had.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from causalcache_memory.actions import Action
from causalcache_memory.selector.features import FeatureExtractor, feature_index
from causalcache_memory.selector.text_features import RETRY, TraceText
from causalcache_memory.trace import Trace

AVAIL, NOVEL, CUR = (feature_index(n) for n in ("text_available", "text_novel_share", "text_current_jaccard"))
ON_CUR = feature_index("text_value_on_current")


def _sha(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


class _Texts:
    def __init__(self, texts: dict[str, str]) -> None:
        self.texts = {_sha(k): v for k, v in texts.items()}
        self.asked: list[str] = []

    def get_text(self, sha256: str) -> str | None:
        self.asked.append(sha256)
        return self.texts.get(sha256)


def _trace(screens: list[str], first: str = "start") -> Trace:
    trace = Trace("Find the note", episode_id="late")
    trace.observe(_sha(first))
    for i, name in enumerate(screens):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", _sha(name), summary=f"click {i}")
    return trace


def test_retry_is_eight() -> None:
    assert RETRY == 8


def test_text_written_later_is_read_on_the_next_decision_with_novelty_against_earlier_screens() -> None:
    src = _Texts({"start": "alpha", "b": "alpha beta gamma", "c": "delta"})
    ext = FeatureExtractor(screen_text=src)
    trace = _trace(["a", "b", "c"])  # a's text unknown for now
    rows = ext(trace, 2, None)
    assert rows[:, AVAIL].tolist() == [0, 1, 1]
    assert rows[1, NOVEL] == pytest.approx(2 / 3)  # {beta, gamma} new after x_1 = {alpha}
    src.texts[_sha("a")] = "beta epsilon"  # e.g. OCR finished in the background
    rows = ext(trace, 2, None)
    assert rows[:, AVAIL].tolist() == [1, 1, 1]
    assert rows[0, NOVEL] == pytest.approx(1.0)  # {beta, epsilon}: none on x_1
    assert rows[1, NOVEL] == pytest.approx(2 / 3)  # b keeps the novelty it had (beta counted new then)


def test_without_the_first_screens_text_every_word_of_the_first_event_is_new() -> None:
    src = _Texts({"a": "alpha beta", "b": "beta"})
    rows = FeatureExtractor(screen_text=src)(_trace(["a", "b"]), 2, None)
    assert rows[0, NOVEL] == 1.0 and rows[1, NOVEL] == 0.0


def test_only_the_newest_retry_events_without_text_are_read_again_per_decision() -> None:
    names = [f"s{i}" for i in range(12)]
    src = _Texts({"s11": "current words"})
    ext = FeatureExtractor(screen_text=src)
    trace = _trace(names)
    ext(trace, 2, None)
    src.asked.clear()
    ext(trace, 2, None)
    # rows 0..10 lack text: the newest 8 (s10 .. s3) are asked again, s0 .. s2 are not
    retried = [n for n in names[:11] if _sha(n) in src.asked]
    assert retried == [f"s{i}" for i in range(3, 11)]


def test_missing_lists_rows_without_text_newest_first_at_most_retry() -> None:
    text = TraceText("goal")
    text.extend([None] * 10)
    assert text.missing(10) == [9, 8, 7, 6, 5, 4, 3, 2]
    assert text.missing(3) == [2, 1, 0]
    text.fill([9, 5], [None, None])  # nothing arrived
    assert text.missing(10)[:2] == [9, 8]


def test_no_current_text_or_no_event_text_masks_every_text_column() -> None:
    src = _Texts({"a": "alpha"})
    rows = FeatureExtractor(screen_text=src)(_trace(["a", "b"]), 2, None)  # current b has no text
    text_cols = [feature_index(n) for n in ("text_available", "text_goal_cover", "text_values_log")]
    assert (rows[:, text_cols] == 0).all()
    src2 = _Texts({"b": "alpha"})
    trace = _trace(["a", "b"])
    rows = FeatureExtractor(screen_text=src2)(trace, 2, None)
    assert rows[:, AVAIL].tolist() == [0, 1]


def test_value_on_current_is_the_share_of_the_events_values() -> None:
    src = _Texts({"a": "Order 12 Room 34 Seat 56", "b": "Room 34 and 56 here"})
    rows = FeatureExtractor(screen_text=src)(_trace(["a", "b"]), 2, None)
    assert rows[0, ON_CUR] == pytest.approx(2 / 3) and rows[1, ON_CUR] == pytest.approx(1.0)


def test_a_screen_without_values_has_value_share_zero() -> None:
    src = _Texts({"a": "no values here", "b": "Room 34"})
    rows = FeatureExtractor(screen_text=src)(_trace(["a", "b"]), 2, None)
    assert rows[0, ON_CUR] == 0.0 and np.isfinite(rows).all()


def test_one_word_identical_screens_have_jaccard_one() -> None:
    rows = FeatureExtractor(screen_text=_Texts({"a": "Save", "b": "save"}))(_trace(["a", "b"]), 2, None)
    assert rows[:, CUR].tolist() == [1.0, 1.0]  # |{save}| / |{save}|


def test_a_goal_without_words_covers_nothing_and_names_nothing() -> None:
    trace = Trace("???", episode_id="late")
    trace.observe(_sha("start"))
    for i, name in enumerate(["a", "b"]):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", _sha(name), summary=f"click {i}")
    rows = FeatureExtractor(screen_text=_Texts({"a": "alpha", "b": "beta"}))(trace, 2, None)
    cols = [feature_index(n) for n in ("text_goal_cover", "text_goal_names", "text_novel_goal")]
    assert (rows[:, cols] == 0).all() and rows[:, AVAIL].tolist() == [1, 1]


def test_a_goal_name_on_the_last_line_without_a_value_is_not_near_a_value() -> None:
    near = feature_index("text_name_value_near")
    trace = Trace("Find the Desk Fan order", episode_id="late")
    trace.observe(_sha("start"))
    for i, name in enumerate(["a", "b", "c", "d"]):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", _sha(name), summary=f"click {i}")
    src = _Texts({"a": "Room 12\nDesk Fan", "b": "Desk Fan\nRoom 34", "c": "Desk Fan Room 12", "d": "x"})
    rows = FeatureExtractor(screen_text=src)(trace, 2, None)
    # a: 'Desk Fan' is the last line and the new value 12 sits on a line without a name; b: 'Desk Fan'
    # above the new 'Room 34'; c: a name beside 12, which a already showed
    assert rows[:, near].tolist() == [0.0, 1.0, 0.0, 0.0]


def test_fill_columns_without_current_text_writes_nothing() -> None:
    from causalcache_memory.selector.features import NUM_FEATURES
    from causalcache_memory.selector.screen_text import encode_text

    text = TraceText("Find the note")
    text.extend([encode_text("the note"), None])
    out = np.full((2, NUM_FEATURES), 7.0, np.float32)
    text.fill_columns(out, 2, None, None, None)
    assert (out == 7.0).all()
    text.fill_columns(out, 2, encode_text("note"), None, None)
    assert out[:, AVAIL].tolist() == [1.0, 0.0] and out[1, CUR] == 0.0 and out[0, CUR] == pytest.approx(1 / 2)


def test_without_line_boxes_the_witness_words_are_its_own_text_without_values() -> None:
    cover = feature_index("text_witness_cover")
    src = _Texts({"a": "Room list", "b": "nothing here"})  # no get_lines: no label under the point
    witness = Action("type", x=0.5, y=0.5, text="Room C9")
    rows = FeatureExtractor(screen_text=src)(_trace(["a", "b"]), 2, witness)
    assert rows[:, cover].tolist() == [1.0, 0.0]  # {room} (C9 holds a digit)


def test_values_novel_is_the_share_of_new_values() -> None:
    novel = feature_index("text_values_novel")
    src = _Texts({"a": "Room 12", "b": "Room 12 Seat 34 Gate 56", "c": "x"})
    rows = FeatureExtractor(screen_text=src)(_trace(["a", "b", "c"]), 2, None)
    assert rows[:2, novel].tolist() == pytest.approx([1.0, 2 / 3])  # b: 34 and 56 new, 12 seen


def test_a_row_without_text_is_zero_in_every_text_column_beside_rows_with_text() -> None:
    """No mask is applied: a row without text has only padding ids and no event columns, so every text
    column (the witness's, the current screen's, the static ones) comes out 0 on its own."""
    from causalcache_memory.selector.schema import FEATURE_SCHEMA

    trace = Trace("Find the Desk Fan order", episode_id="late")
    trace.observe(_sha("start"))
    for i, name in enumerate(["a", "b", "c"]):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", _sha(name), summary=f"click {i}")
    src = _Texts({"start": "Orders", "a": "Desk Fan\nRoom 12 TK-3781", "c": "Desk Fan order Room 12"})
    witness = Action("type", x=0.5, y=0.5, text="Desk Fan TK-9999")
    rows = FeatureExtractor(screen_text=src)(trace, 2, witness)
    text_cols = [i for i, (name, _) in enumerate(FEATURE_SCHEMA) if name.startswith("text_")]
    assert rows[:, AVAIL].tolist() == [1.0, 0.0, 1.0]
    assert (rows[1, text_cols] == 0).all()
    assert (rows[0, text_cols] != 0).sum() >= 8  # the row with text does set the columns


def test_read_gives_one_text_per_hash_from_the_class_or_an_instance() -> None:
    src = _Texts({"a": "alpha"})
    from causalcache_memory.selector.screen_text import ScreenTextCache

    cache = ScreenTextCache(src)
    for reader in (TraceText.read, TraceText("goal").read):
        blobs = reader(cache, [_sha("a"), None, _sha("zz")])
        assert [b is not None for b in blobs] == [True, False, False] and blobs[0].n_words == 1
        assert reader(None, [_sha("a")]) == [None]


def test_fill_refuses_rows_and_texts_that_do_not_pair_up() -> None:
    from causalcache_memory.selector.screen_text import encode_text

    text = TraceText("goal")
    text.extend([None, None])
    with pytest.raises(ValueError, match="zip"):
        text.fill([0, 1], [encode_text("alpha")])
    with pytest.raises(ValueError, match="zip"):
        text.fill([0], [None, encode_text("alpha")])


def test_a_goal_name_is_near_a_value_only_on_its_own_line_or_the_next_not_two_lines_below() -> None:
    """``text_name_value_near``: a new value on the name's line or the line after it counts; a value two
    lines below the name (a line without a name between them) does not."""
    near = feature_index("text_name_value_near")
    trace = Trace("Find the Desk Fan order", episode_id="late")
    trace.observe(_sha("start"))
    for i, name in enumerate(["a", "b", "c", "d"]):
        trace.record(Action("click", x=0.5, y=0.5), f"r{i}", _sha(name), summary=f"click {i}")
    src = _Texts(
        {
            "a": "Desk Fan\nshipping\nRoom 12",  # the value two lines below the name
            "b": "Desk Fan\nRoom 34\nshipping",  # the value on the next line
            "c": "Desk Fan Room 56\nshipping",  # the value on the name's line
            "d": "x",
        }
    )
    rows = FeatureExtractor(screen_text=src)(trace, 2, None)
    assert rows[:3, near].tolist() == [0.0, 1.0, 1.0]
