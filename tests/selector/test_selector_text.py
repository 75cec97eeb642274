"""Screen-text features of the selector: the source, the per-blob encoding, masking and the allocator's wiring."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from causalcache_memory.actions import Action
from causalcache_memory.selector import schema as S
from causalcache_memory.selector.features import FEATURE_SCHEMA, FeatureExtractor, feature_index
from causalcache_memory.selector.screen_text import (
    ScreenTextCache,
    encode_text,
    goal_names,
    label_at,
    value_shape,
    value_tokens,
)
from causalcache_memory.trace import Trace

TEXT_COLUMNS = [i for i, (n, _) in enumerate(FEATURE_SCHEMA) if n.startswith("text_")]
GOAL = "Open Shop. Get the order number of your Desk Lamp order. Add the order number as a note in Notes."


def _sha(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


class DictText:
    """A screen-text source backed by a dict (unknown hashes: None); counts reads."""

    def __init__(self, texts: dict[str, str], lines: dict[str, list] | None = None) -> None:
        self.texts, self.lines, self.reads = dict(texts), dict(lines or {}), 0

    def get_text(self, sha256: str) -> str | None:
        self.reads += 1
        return self.texts.get(sha256)

    def get_lines(self, sha256: str):  # type: ignore[no-untyped-def]
        return self.lines.get(sha256)


SCREENS = {
    "home": "Home\n09:41\nShop\nNotes\nMessages",
    "orders": "Shop\n09:41\nOrders\nDesk Lamp\nPlant Pot",
    "lamp": "Shop\n09:41\nDesk Lamp\nOrder #526321\nStatus: Delivered",
    "pot": "Shop\n09:41\nPlant Pot\nOrder #862005\nStatus: Processing",
    "notes": "Notes\n09:41\nQuick note\nAdd",
}


def _trace(order=("orders", "lamp", "pot", "home", "notes")) -> Trace:
    trace = Trace(GOAL, episode_id="text-test")
    trace.observe(_sha("home"))
    for i, name in enumerate(order):
        trace.record(Action("click", x=0.5, y=0.1 * (i + 1)), f"r{i}", _sha(name), app="Shop")
    return trace


def _source() -> DictText:
    lines = {_sha("notes"): [("Notes", (0, 0, 0.3, 0.05)), ("Quick note", (0.1, 0.1, 0.9, 0.15))]}
    return DictText({_sha(k): v for k, v in SCREENS.items()}, lines)


def _col(name: str) -> int:
    return feature_index(name)


def test_value_tokens_shapes_and_goal_names():
    assert value_tokens("Order #526321 Total: $43.55 Ticket: TK-3781 Jan 4") == ["526321", "43.55", "TK-3781"]
    assert value_shape("TK-3781") == "AA-9999" and value_shape("526321") == "999999"
    assert goal_names(GOAL) == {"shop", "desk", "lamp", "notes"}  # sentence-initial words are not names
    blob = encode_text(SCREENS["lamp"])
    assert blob.n_values == 2 and [bool(v) for v in blob.line_values] == [False, True, False, True, False]
    assert label_at([("Quick note", (0.1, 0.1, 0.9, 0.15))], 0.5, 0.12) == "Quick note"
    assert label_at([("Quick note", (0.1, 0.1, 0.9, 0.15))], 0.5, 0.5) is None


def test_text_features_are_masked_without_a_source_or_current_text():
    trace = _trace()
    plain = FeatureExtractor()(trace, 2, Action("type", text="123456", x=0.5, y=0.12))
    assert not plain[:, TEXT_COLUMNS].any()
    texts = {_sha(k): v for k, v in SCREENS.items() if k != "notes"}  # the current screen's text is unknown
    masked = FeatureExtractor(screen_text=DictText(texts))(trace, 2, Action("type", text="123456"))
    assert not masked[:, TEXT_COLUMNS].any()
    # an event without text is masked on its own row only
    partial = {_sha(k): v for k, v in SCREENS.items() if k != "pot"}
    rows = FeatureExtractor(screen_text=DictText(partial))(trace, 2, None)
    pot = 2  # event 3 shows the pot
    assert rows[pot, _col("text_available")] == 0 and not rows[pot, TEXT_COLUMNS].any()
    assert rows[[0, 1, 3, 4], _col("text_available")].all()


def test_content_features_find_the_screen_with_the_goal_item_and_a_value_of_the_typed_shape():
    fx = FeatureExtractor(screen_text=_source())
    witness = Action("type", text="111111", x=0.5, y=0.12)  # a guess of the right shape, typed in Quick note
    f = fx(_trace(), 2, witness)
    lamp, pot, orders, home = 1, 2, 0, 3
    assert f[lamp, _col("text_witness_shape")] == 1.0 and f[orders, _col("text_witness_shape")] == 0.0
    assert f[lamp, _col("text_name_value_near")] == 1.0  # 'Desk Lamp' above 'Order #526321'
    assert f[pot, _col("text_name_value_near")] == 0.0  # Plant Pot is not named by the goal
    assert f[lamp, _col("text_goal_names")] > f[pot, _col("text_goal_names")]
    assert f[home, _col("text_novel_share")] < f[lamp, _col("text_novel_share")]  # home was x_1
    # the order number is new, the clock was on x_1 already
    assert f[lamp, _col("text_values_novel")] == 0.5 and f[home, _col("text_values_novel")] == 0.0
    # the element under the witness's point on the current screen ('Quick note') names the field
    assert f[4, _col("text_witness_cover")] == 1.0 and f[lamp, _col("text_witness_cover")] == 0.0


def test_text_that_arrives_later_is_picked_up_and_blobs_are_read_once():
    texts = {_sha(k): v for k, v in SCREENS.items() if k != "lamp"}
    source = DictText(texts)
    fx = FeatureExtractor(screen_text=source)
    trace = _trace()
    before = fx(trace, 2, None)
    assert before[1, _col("text_available")] == 0
    source.texts[_sha("lamp")] = SCREENS["lamp"]  # e.g. OCR finished in the background
    after = fx(trace, 2, None)
    assert after[1, _col("text_available")] == 1 and after[1, _col("text_name_value_near")] == 1
    reads = source.reads
    fx(trace, 2, None)
    assert source.reads == reads  # every text known: nothing is read again (the current screen is cached)


def test_screen_text_cache_masks_failing_sources():
    class Broken:
        def get_text(self, sha256: str) -> str | None:
            raise OSError("disk gone")

    assert ScreenTextCache(Broken()).get(_sha("x")) is None


@pytest.mark.parametrize(
    ("action", "family"),
    [
        (Action("type", text="open Shop"), "app"),
        (Action("type", text="go back"), "nav"),
        (Action("type", text="go home"), "nav"),
        (Action("key", keys=("escape",)), "nav"),
        (Action("open_app", text="Shop"), "app"),
        (Action("type", text="open Shop", x=0.2, y=0.3), "type"),  # typed into a field: text entry
        (Action("hotkey", keys=("ctrl", "c")), "key"),
    ],
)
def test_action_families_are_normalised_across_vocabularies(action, family):
    assert S.TYPE_GROUPS[S.action_type_group(action)][0] == family


def test_every_action_type_has_a_family():
    from causalcache_memory.actions.model import ACTION_TYPES

    assert set(ACTION_TYPES) <= set(S.GROUP_OF)
    names = [n for n, _ in FEATURE_SCHEMA]
    assert not [n for n in names if "type_id" in n or n.startswith("verb")]  # no raw verb ids


def test_allocator_reads_text_from_the_archive_or_a_given_source():
    from causalcache_memory.selector.allocator import SelectorAllocator, bundled_model_path

    model = bundled_model_path()

    class TextArchive:
        def get_text(self, sha256: str) -> str | None:
            return SCREENS["lamp"]

    sel = SelectorAllocator(model)
    assert sel._extractor_for(TextArchive()).screen_text is not None
    assert sel._extractor_for(object()).screen_text is None  # no get_text: text features masked
    given = SelectorAllocator(model, screen_text=_source())
    assert given._extractor_for(TextArchive()).screen_text.source is given.screen_text


def test_features_with_text_stay_finite_and_deterministic():
    a = FeatureExtractor(screen_text=_source())(_trace(), 2, Action("type", text="TK-1234", x=0.5, y=0.12))
    b = FeatureExtractor(screen_text=_source())(_trace(), 2, Action("type", text="TK-1234", x=0.5, y=0.12))
    assert np.isfinite(a).all() and np.array_equal(a, b)
    assert a[:, TEXT_COLUMNS].max() <= 1.0 + 1e-6 and a[:, TEXT_COLUMNS].min() >= 0.0
