"""Golden values for every selector feature column and every context column (issue 52).

Each expected value is written out by hand below from the column's description in
:data:`~causalcache_memory.selector.schema.FEATURE_SCHEMA`, on small traces chosen for their edge cases:
identical screens (v_2 = v_4 = the current screen), a screen whose text is unknown (a masked row), empty
text, one- and two-character values (``4`` is not a value, ``12`` and ``B7`` are), app labels, thumbnails
and screen text missing (masked groups), the first and the last event, and a budget larger than the
history. Nothing calls the extractor's helpers: word sets are listed in the comments; the character
3-gram Jaccard alone is computed by a few lines of this file (:func:`_char_jaccard`). Word-based values
assume distinct words fall in distinct hash buckets, which :func:`test_the_hand_values_have_no_bucket_collisions`
checks with ``zlib.crc32`` directly.

``test_every_column_has_a_golden_entry`` fails when a column is added to the schema without one here.
"""

from __future__ import annotations

import math
import re
import zlib

import numpy as np
import pytest
from named_texts import NamedTexts, sha_of

from causalcache_memory.actions import Action
from causalcache_memory.selector.features import FeatureExtractor
from causalcache_memory.selector.schema import CONTEXT_SCHEMA, FEATURE_SCHEMA, context_features
from causalcache_memory.trace import Trace

FEATURES = [n for n, _ in FEATURE_SCHEMA]
CONTEXT = [n for n, _ in CONTEXT_SCHEMA]
FAMILIES = ("click", "drag", "scroll", "type", "key", "app", "nav", "end")


_sha = sha_of


# ------------------------------------------------------------------ the traces
GOAL = "Open Shop and find the Desk Fan order"
# goal words G = {open, shop, and, find, the, desk, fan, order} (8); goal names {shop, desk, fan}
# ("Open" starts the sentence)
TEXTS = {
    "home": "Home\nShop\nNotes",  # x_1: {home, shop, notes}, no value
    "orders": "Shop\nOrders\nDesk Fan\nRoom 12",  # v_1: {shop, orders, desk, fan, room, 12}; value 12
    "lamp": "Desk Fan\nOrder B7\nSeat 4",  # v_2 = v_4 = x_5: {desk, fan, order, b7, seat, 4}; value B7 only
    # "lamp2" (v_3): text unknown
    "blank0": "",
    "blank1": "",
}
# boxes of the current screen's lines: the witness point (0.5, 0.45) lies on "Order B7"
LINES = {"lamp": [("Desk Fan", (0.0, 0.25, 1.0, 0.35)), ("Order B7", (0.0, 0.4, 1.0, 0.5))]}


def _half() -> np.ndarray:
    """8x8 RGB: left half 0, right half 1 (its 4x4 area average: columns 0, 0, 1, 1; mean 0.5)."""
    img = np.zeros((8, 8, 3), np.float32)
    img[:, 4:] = 1.0
    return img


THUMBS = {
    "home": np.full((8, 8, 3), 0.2, np.float32),
    "orders": np.full((4, 4, 3), 0.4, np.float32),
    "lamp": _half(),
    # "lamp2": no thumbnail
}


_Texts = NamedTexts


class _Thumbs:
    def __init__(self, images: dict[str, np.ndarray]) -> None:
        self.images = {_sha(k): v for k, v in images.items()}

    def get(self, sha256: str) -> np.ndarray:
        return self.images[sha256]  # KeyError: no thumbnail


# the main trace, decision t = 5 (ages 4, 3, 2, 1):
#   e_1 open_app "Shop"         summary "open Shop"          app Shop   x_1 home   -> v_1 orders
#   e_2 click (0.5, 0.44)       summary "click Desk Fan"    app -      x_2 orders -> v_2 lamp
#   e_3 type (0.2, 0.8) "C9 Room 77"  summary 'type "C9 Room 77"'  app Shop  -> v_3 lamp2 (no text, no thumb)
#   e_4 click (0.9, 0.7)        summary "click Orders"       app Notes  x_4 lamp2  -> v_4 lamp = x_5
MAIN = (
    (Action("open_app", text="Shop"), "open Shop", "Shop", "orders"),
    (Action("click", x=0.5, y=0.44), "click Desk Fan", None, "lamp"),
    (Action("type", x=0.2, y=0.8, text="C9 Room 77"), 'type "C9 Room 77"', "Shop", "lamp2"),
    (Action("click", x=0.9, y=0.7), "click Orders", "Notes", "lamp"),
)
ONE_GOAL = "Save the note in Notes"
W_CLICK = Action("click", x=0.5, y=0.45)  # rendered 'click (0.500, 0.450)'
W_TYPE = Action("type", x=0.5, y=0.45, text="C9 Room 77")  # rendered 'type (0.500, 0.450) "C9 Room 77"'
R_CLICK, R_TYPE = "click (0.500, 0.450)", 'type (0.500, 0.450) "C9 Room 77"'


def _trace(goal: str, first: str, steps) -> Trace:  # type: ignore[no-untyped-def]
    trace = Trace(goal, episode_id="goldens")
    trace.observe(_sha(first))
    for i, (action, summary, app, screen) in enumerate(steps):
        trace.record(action, f"r{i}", _sha(screen), app=app, summary=summary)
    return trace


def _case(name: str) -> np.ndarray:
    """The ``(t-1, F)`` feature rows of case ``name``."""
    if name in ("click2", "click10", "type2", "none2"):
        budget = 10 if name == "click10" else 2
        witness = {"click": W_CLICK, "type": W_TYPE, "none": None}[name.rstrip("0123456789")]
        extractor = FeatureExtractor(_Thumbs(THUMBS), screen_text=_Texts(TEXTS, LINES))
        return extractor(_trace(GOAL, "home", MAIN), budget, witness)
    if name == "masked":  # the latest event has no app label, no thumbnails, no text for the current screen
        steps = (*MAIN[:3], (MAIN[3][0], MAIN[3][1], None, "lamp"))
        texts = {k: v for k, v in TEXTS.items() if k != "lamp"}
        return FeatureExtractor(None, screen_text=_Texts(texts))(_trace(GOAL, "home", steps), 2, W_CLICK)
    if name == "one":  # one event, B = 3 larger than the history
        steps = ((Action("click", x=0.5, y=0.45), "click Save", "Notes", "lamp"),)
        extractor = FeatureExtractor(_Thumbs(THUMBS), screen_text=_Texts(TEXTS, LINES))
        return extractor(_trace(ONE_GOAL, "home", steps), 3, W_CLICK)
    if name == "empty":  # known but empty text on x_1, v_1 and the current screen
        steps = ((Action("click", x=0.5, y=0.5), "click Note", None, "blank1"),)
        extractor = FeatureExtractor(_Thumbs(THUMBS), screen_text=_Texts(TEXTS))
        return extractor(_trace("Write the note", "blank0", steps), 2, None)
    raise KeyError(name)


def _char_jaccard(a: str, b: str) -> float:
    """Jaccard of the hashed (crc32 mod 512) character 3-gram sets of two texts' normalised words."""

    def grams(text: str) -> set[int]:
        s = " ".join(re.findall(r"[a-z0-9]+", text.lower()))
        return {zlib.crc32(s[i : i + 3].encode()) % 512 for i in range(len(s) - 2)}

    x, y = grams(a), grams(b)
    return len(x & y) / len(x | y) if x | y else 0.0


L = math.log
LT = math.log(1000.0)
V1 = math.log(2.0) / math.log(10.0)  # text_values_log of a screen with one value
HYP = math.hypot
ZERO4 = [0.0] * 4
MAIN_W = ("click2", "type2", "none2")  # the main trace at B = 2 under each witness
SUMMARIES = [s for _, s, _, _ in MAIN]


def _onehot(family: str, rows: int) -> dict[str, list[float]]:
    return {f: [1.0 if f == family else 0.0] * rows for f in FAMILIES}


_WT = {w: _onehot(f, 4) for w, f in (("click2", "click"), ("type2", "type"), ("none2", ""))}
_EV = {  # e_1 app, e_2 click, e_3 type, e_4 click
    "click": [0, 1, 0, 1],
    "app": [1, 0, 0, 0],
    "type": [0, 0, 1, 0],
}

#: column -> {case or cases: expected rows}
GOLDEN: dict[str, dict[str | tuple[str, ...], list[float]]] = {
    # ---------------------------------------------------------------- recency (ages 4, 3, 2, 1)
    "age_log": {MAIN_W: [L(5), L(4), L(3), L(2)], "one": [L(2)]},
    "age_rel": {MAIN_W: [1.0, 0.75, 0.5, 0.25], "one": [1.0]},
    "age_beyond_window_log": {"click2": [L(3), L(2), 0, 0], "click10": ZERO4, "one": [0]},
    "in_recent": {"click2": [0, 0, 1, 1], "click10": [1, 1, 1, 1], "one": [1]},
    "recent_rank": {"click2": [0, 0, 1.0, 0.5], "click10": [0.4, 0.3, 0.2, 0.1], "one": [1 / 3]},
    "is_oldest_recent": {"click2": [0, 0, 1, 0], "click10": [1, 0, 0, 0], "one": [1]},
    "budget_norm": {"click2": [0.25] * 4, "click10": [1.25] * 4, "one": [0.375]},
    "t_log": {MAIN_W: [L(6) / LT] * 4, "one": [L(3) / LT]},
    "pool_frac": {"click2": [0.5] * 4, "click10": [1.0] * 4, "one": [1.0]},
    # ---------------------------------------------------------------- the witness and the actions
    "witness_present": {("click2", "type2"): [1] * 4, "none2": ZERO4, "empty": [0]},
    "next_available": {MAIN_W: [1, 1, 1, 0], "one": [0]},
    # click witness matches a_2 only (0.01 away; a_4 is 0.47 away); the type witness matches a_3 (same text)
    "own_match": {"click2": [0, 1, 0, 0], "type2": [0, 0, 1, 0], "none2": ZERO4, "one": [1]},
    "own_type_match": {"click2": [0, 1, 0, 1], "type2": [0, 0, 1, 0], "none2": ZERO4, "one": [1]},
    "next_match": {"click2": [1, 0, 0, 0], "type2": [0, 1, 0, 0], "none2": ZERO4, "one": [0]},
    "next_type_match": {"click2": [1, 0, 1, 0], "type2": [0, 1, 0, 0], "none2": ZERO4, "one": [0]},
    "next_point_dist": {
        ("click2", "type2"): [0.01, HYP(0.3, 0.35), HYP(0.4, 0.25), 1.0],  # a_2, a_3, a_4 to (0.5, 0.45)
        "none2": [1.0] * 4,
        "one": [1.0],
    },
    **{
        f"witness_type_{f}": {w: _WT[w][f] for w in MAIN_W} | {"one": [1.0 if f == "click" else 0.0]}
        for f in FAMILIES
    },
    **{
        f"event_type_{f}": {MAIN_W: _EV.get(f, ZERO4), "one": [1.0 if f == "click" else 0.0]}
        for f in FAMILIES
    },
    # ---------------------------------------------------------------- summary overlaps
    # {open, shop}: 2/8; {click, desk, fan}: 2/9; {type, c9, room, 77}: 0; {click, orders}: 0
    "goal_token_jaccard": {
        MAIN_W: [2 / 8, 2 / 9, 0, 0],
        "one": [1 / 6],
    },  # {click, save}: {save, the, note, in, notes}
    "goal_char_jaccard": {MAIN_W: [_char_jaccard(s, GOAL) for s in SUMMARIES]},
    # rendering tokens: click {click, 0, 500, 450}; type {type, 0, 500, 450, c9, room, 77}
    "ref_token_jaccard": {
        "click2": [0, 1 / 6, 0, 1 / 5],
        "type2": [0, 0, 4 / 7, 0],
        "none2": ZERO4,
        "one": [1 / 5],
    },
    "ref_char_jaccard": {
        "click2": [_char_jaccard(s, R_CLICK) for s in SUMMARIES],
        "type2": [_char_jaccard(s, R_TYPE) for s in SUMMARIES],
        "none2": ZERO4,
    },
    "next_ref_token_jaccard": {"click2": [1 / 6, 0, 1 / 5, 0], "type2": [0, 4 / 7, 0, 0], "none2": ZERO4},
    # ---------------------------------------------------------------- apps: Shop, -, Shop, Notes
    "app_in_goal": {MAIN_W: [1, 0, 1, 0], "masked": ZERO4, "one": [1]},
    "app_differs_current": {MAIN_W: [1, 0, 1, 0], "masked": ZERO4, "one": [0]},
    "app_switch_after": {MAIN_W: [0, 0, 1, 0], "masked": ZERO4, "one": [0]},
    "app_available": {MAIN_W: [1, 0, 1, 1], "masked": ZERO4, "one": [1]},
    # ---------------------------------------------------------------- thumbnails: 0.4, half, -, half; x_1 0.2
    "image_available": {MAIN_W: [1, 1, 0, 1], "masked": ZERO4, "one": [1]},
    "image_dist_current": {MAIN_W: [0.5, 0, 0, 0], "masked": ZERO4, "one": [0]},
    "image_dist_prev": {MAIN_W: [0.2, 0.5, 0, 0], "masked": ZERO4, "one": [0.5]},  # v_4's x_4 has none
    "image_mean": {MAIN_W: [0.4, 0.5, 0, 0.5], "masked": ZERO4, "one": [0.5]},
    # ---------------------------------------------------------------- screen text (v_3 unknown: masked row)
    "text_available": {MAIN_W: [1, 1, 0, 1], "masked": ZERO4, "empty": [1]},
    "text_goal_cover": {MAIN_W: [3 / 8, 3 / 8, 0, 3 / 8], "masked": ZERO4, "empty": [0]},
    "text_goal_names": {MAIN_W: [1, 2 / 3, 0, 2 / 3], "masked": ZERO4, "empty": [0]},
    # v_1 & x_5 = {desk, fan}, union 10; identical screens v_2, v_4: 1; both empty: 0
    "text_current_jaccard": {MAIN_W: [0.2, 1, 0, 1], "masked": ZERO4, "empty": [0]},
    # click witness: label "Order B7" -> {order, b7}; type witness adds "Room" (C9 and 77 hold digits)
    "text_witness_cover": {"click2": [0, 1, 0, 1], "type2": [1 / 3, 2 / 3, 0, 2 / 3], "none2": ZERO4},
    # type witness shapes {A9, 99}: v_1 has 99 (12), v_2 and v_4 have A9 (B7); a click has no text
    "text_witness_shape": {"click2": ZERO4, "type2": [0.5, 0.5, 0, 0.5], "none2": ZERO4},
    # new words: v_1 {orders, desk, fan, room, 12} of 6; v_2 {order, b7, seat, 4} of 6; v_4 none
    "text_novel_share": {MAIN_W: [5 / 6, 4 / 6, 0, 0], "masked": ZERO4, "empty": [0]},
    "text_novel_goal": {MAIN_W: [2 / 8, 1 / 8, 0, 0], "masked": ZERO4, "empty": [0]},
    "text_values_log": {MAIN_W: [V1, V1, 0, V1], "masked": ZERO4, "empty": [0]},  # "4" is no value
    "text_values_novel": {MAIN_W: [1, 1, 0, 0], "masked": ZERO4, "empty": [0]},
    # "Desk Fan" above "Room 12" (v_1) and above "Order B7" (v_2); on v_4 B7 is not new
    "text_name_value_near": {MAIN_W: [1, 1, 0, 0], "masked": ZERO4, "empty": [0]},
    "text_value_on_current": {MAIN_W: [0, 1, 0, 1], "masked": ZERO4, "empty": [0]},
}

ESCAPE = Action("key", keys=("escape",))  # the nav family
#: context column -> {(t, B, witness name): value}
CONTEXT_CASES = {"t5-B2-click": (5, 2, W_CLICK), "t5-B10-type": (5, 10, W_TYPE), "t1-B3": (1, 3, None)}
CONTEXT_CASES["t2-B1-escape"] = (2, 1, ESCAPE)
_WIT = {"t5-B2-click": "click", "t5-B10-type": "type", "t1-B3": "", "t2-B1-escape": "nav"}
GOLDEN_CONTEXT: dict[str, dict[str, float]] = {
    "budget_norm": {"t5-B2-click": 0.25, "t5-B10-type": 1.25, "t1-B3": 0.375, "t2-B1-escape": 0.125},
    "t_log": {
        "t5-B2-click": L(6) / LT,
        "t5-B10-type": L(6) / LT,
        "t1-B3": L(2) / LT,
        "t2-B1-escape": L(3) / LT,
    },
    # min(B, t-1) / max(t-1, 1): the first decision has no history (0 / 1)
    "pool_frac": {"t5-B2-click": 0.5, "t5-B10-type": 1.0, "t1-B3": 0.0, "t2-B1-escape": 1.0},
    "witness_present": {"t5-B2-click": 1, "t5-B10-type": 1, "t1-B3": 0, "t2-B1-escape": 1},
    **{f"witness_type_{f}": {c: float(w == f) for c, w in _WIT.items()} for f in FAMILIES},
}


def _cases() -> list[tuple[str, str, list[float]]]:
    out = []
    for column, entries in GOLDEN.items():
        for cases, rows in entries.items():
            for case in (cases,) if isinstance(cases, str) else cases:
                out.append((column, case, rows))
    return out


_ROWS: dict[str, np.ndarray] = {}


def _rows(case: str) -> np.ndarray:
    if case not in _ROWS:
        _ROWS[case] = _case(case)
    return _ROWS[case]


def test_every_column_has_a_golden_entry() -> None:
    assert len(FEATURES) == 57 and len(CONTEXT) == 12
    assert sorted(GOLDEN) == sorted(FEATURES), set(FEATURES) ^ set(GOLDEN)
    assert sorted(GOLDEN_CONTEXT) == sorted(CONTEXT), set(CONTEXT) ^ set(GOLDEN_CONTEXT)
    assert all(GOLDEN[c] for c in FEATURES) and all(GOLDEN_CONTEXT[c] for c in CONTEXT)


@pytest.mark.parametrize(("column", "case", "rows"), _cases(), ids=lambda v: v if isinstance(v, str) else "")
def test_feature_column_matches_its_hand_computed_golden(column, case, rows) -> None:
    got = _rows(case)[:, FEATURES.index(column)]
    np.testing.assert_allclose(got, np.asarray(rows, dtype=np.float64), rtol=1e-6, atol=1e-7, err_msg=column)


@pytest.mark.parametrize("column", CONTEXT)
def test_context_column_matches_its_hand_computed_golden(column) -> None:
    for case, expected in GOLDEN_CONTEXT[column].items():
        t, budget, witness = CONTEXT_CASES[case]
        got = context_features(t, budget, witness)[0, CONTEXT.index(column)]
        assert got == pytest.approx(expected, rel=1e-6, abs=1e-7), (column, case)


def test_the_first_decision_has_no_feature_rows() -> None:
    trace = Trace(GOAL, episode_id="goldens")
    trace.observe(_sha("home"))
    assert FeatureExtractor(_Thumbs(THUMBS), screen_text=_Texts(TEXTS))(trace, 2, W_CLICK).shape == (0, 57)


def test_the_hand_values_have_no_bucket_collisions() -> None:
    """The word-based goldens count distinct words; they hold only where distinct words hash apart."""

    def distinct(items: set[str], buckets: int) -> bool:
        return len({zlib.crc32(i.encode()) % buckets for i in items}) == len(items)

    def words(text: str) -> set[str]:
        return set(re.findall(r"[a-z0-9]+", text.lower()))

    summary_words = set().union(
        *(words(s) for s in [*SUMMARIES, GOAL, R_CLICK, R_TYPE, "click Save", ONE_GOAL])
    )
    assert distinct(summary_words, 256)  # summary token buckets
    screen_words = set().union(*(words(t) for t in [*TEXTS.values(), GOAL, "Order B7 Room"]))
    assert distinct(screen_words, 1024)  # screen-text word buckets
    assert distinct({"12", "b7", "c9", "77"}, 1024)  # value buckets
    assert distinct({"99", "A9"}, 64)  # value-shape buckets
