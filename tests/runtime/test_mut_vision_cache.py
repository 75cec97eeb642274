"""The vision cache's bookkeeping on a fake tower (issue 52's mutation run of ``runtime/vision_cache.py``):
counters, the byte bound, eviction order, deepstack layers, refusals. CPU only, no model."""

from __future__ import annotations

import pytest

from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime.vision_cache import (
    VisionCache,
    VisionCacheStats,
    check_vision_cache_mb,
    image_key,
    unsupported_reason,
)

torch = pytest.importorskip("torch")


class _Out:
    def __init__(self, pooler_output, deepstack_features=None):  # type: ignore[no-untyped-def]
        self.pooler_output = pooler_output
        if deepstack_features is not None:
            self.deepstack_features = deepstack_features


class _Tower:
    """Features of an image = its rows' column sums, repeated ``tokens`` times; ``layers`` deepstack
    layers each the features times ``layer + 2``."""

    def __init__(self, tokens: int = 2, layers: int = 0) -> None:
        self._param = torch.zeros(1)
        self.model = self
        self.tokens, self.layers = tokens, layers
        self.batches: list[int] = []
        self.rows: list[torch.Tensor] = []  # the rows each call received

    def parameters(self):  # type: ignore[no-untyped-def]
        yield self._param

    def get_image_features(self, rows, grid, return_dict=True):  # type: ignore[no-untyped-def]
        assert return_dict is True
        self.batches.append(len(grid))
        self.rows.append(rows.clone())
        out, start = [], 0
        for t, h, w in grid.tolist():
            out.append(rows[start : start + t * h * w].sum(0, keepdim=True).repeat(self.tokens, 1))
            start += t * h * w
        deep = [tuple(o * (k + 2) for o in out) for k in range(self.layers)] if self.layers else None
        return _Out(tuple(out), deep)


def _img(value: float, rows: int = 4) -> torch.Tensor:
    return torch.full((rows, 3), float(value))


GRID = [1, 2, 2]
ENTRY = 2 * 3 * 4  # (2, 3) float32 features


def _call(cache: VisionCache, tower: _Tower, *values: float):  # type: ignore[no-untyped-def]
    rows = torch.cat([_img(v) for v in values])
    return cache.image_features(tower, rows, torch.tensor([GRID] * len(values)))


def test_check_vision_cache_mb_accepts_non_negative_ints_only() -> None:
    assert check_vision_cache_mb(0) == 0 and check_vision_cache_mb(512) == 512
    for bad in (-1, 1.5, True, "512", None):
        with pytest.raises(ConfigError, match=rf"vision_cache_mb={bad!r} must be an integer >= 0"):
            check_vision_cache_mb(bad)


def test_from_mb_builds_a_cache_of_that_many_mebibytes_or_none() -> None:
    assert VisionCache.from_mb(0) is None
    assert VisionCache.from_mb(3).capacity_bytes == 3 * 1024 * 1024
    with pytest.raises(ConfigError):
        VisionCache.from_mb(-2)
    for bad in (0, -1):
        with pytest.raises(ConfigError, match=rf"capacity_bytes={bad} must be > 0"):
            VisionCache(bad)


def test_a_call_encodes_only_new_images_once_each_in_one_batch() -> None:
    cache, tower = VisionCache(1 << 20), _Tower()
    out = _call(cache, tower, 1, 2, 1)  # a repeat within the call
    assert tower.batches == [2]
    assert [o[0, 0].item() for o in out.pooler_output] == [4.0, 8.0, 4.0]
    assert cache.stats() == VisionCacheStats(1, 2, 2, 0, 2, 2 * ENTRY, 1 << 20)
    _call(cache, tower, 2, 3)
    assert tower.batches == [2, 1]
    stats = cache.stats()
    assert (stats.hits, stats.misses, stats.images_encoded, stats.entries) == (2, 3, 3, 3)


def test_the_tower_gets_exactly_the_rows_of_the_new_images_when_a_later_one_is_cached() -> None:
    """The first of several images is new while a later one is stored: the tower receives the new
    images' rows only (a real tower reads as many rows as the grid says, so extra rows shift the rest)."""
    cache, tower = VisionCache(1 << 20), _Tower()
    _call(cache, tower, 2)
    _call(cache, tower, 1, 2)  # only the first is new
    torch.testing.assert_close(tower.rows[-1], _img(1))
    _call(cache, tower, 4)
    _call(cache, tower, 1, 4, 3)  # the first stored now, the last new
    torch.testing.assert_close(tower.rows[-1], _img(3))
    out = _call(cache, tower, 5, 4, 6)  # new, stored, new
    torch.testing.assert_close(tower.rows[-1], torch.cat([_img(5), _img(6)]))
    assert [o[0, 0].item() for o in out.pooler_output] == [20.0, 16.0, 24.0]


def test_hits_only_never_call_the_tower() -> None:
    cache, tower = VisionCache(1 << 20), _Tower()
    _call(cache, tower, 1)
    out = _call(cache, tower, 1, 1)
    assert tower.batches == [1] and cache.stats().hits == 2 and len(out.pooler_output) == 2


def test_eviction_drops_the_least_recently_used_and_keeps_the_bound() -> None:
    cache, tower = VisionCache(2 * ENTRY), _Tower()
    _call(cache, tower, 1)
    _call(cache, tower, 2)
    _call(cache, tower, 1)  # 1 is now the most recent
    _call(cache, tower, 3)  # evicts 2
    stats = cache.stats()
    assert (stats.entries, stats.bytes, stats.evictions) == (2, 2 * ENTRY, 1)
    before = len(tower.batches)
    _call(cache, tower, 1, 3)
    assert len(tower.batches) == before  # both stored
    _call(cache, tower, 2)
    assert len(tower.batches) == before + 1  # 2 was the one evicted


def test_an_entry_exactly_at_the_bound_is_stored_and_one_byte_over_is_not() -> None:
    at, tower = VisionCache(ENTRY), _Tower()
    _call(at, tower, 1)
    assert at.stats().entries == 1 and at.stats().bytes == ENTRY
    over = VisionCache(ENTRY - 1)
    out = _call(over, tower, 1)
    assert over.stats().entries == 0 and over.stats().bytes == 0 and out.pooler_output[0].shape == (2, 3)


def test_clear_drops_entries_and_resets_counters() -> None:
    cache, tower = VisionCache(1 << 20), _Tower()
    _call(cache, tower, 1, 1)
    cache.clear()
    assert cache.stats() == VisionCacheStats(0, 0, 0, 0, 0, 0, 1 << 20)
    _call(cache, tower, 1)
    assert cache.stats().misses == 1  # really gone


def test_deepstack_layers_are_cached_and_returned_per_layer() -> None:
    cache, tower = VisionCache(1 << 20), _Tower(layers=2)
    first = _call(cache, tower, 1, 2)
    again = _call(cache, tower, 2, 1)
    assert len(again.deepstack_features) == 2 and tower.batches == [2]
    for layer in range(2):
        torch.testing.assert_close(again.deepstack_features[layer][0], first.deepstack_features[layer][1])
        assert again.deepstack_features[layer][1][0, 0].item() == 4.0 * (layer + 2)
    assert cache.stats().bytes == 2 * 3 * ENTRY  # pooler + two layers per image
    plain = _call(VisionCache(1 << 20), _Tower(), 1)
    assert not hasattr(plain, "deepstack_features")


def test_stored_features_do_not_keep_the_batch_alive() -> None:
    cache, tower = VisionCache(1 << 20), _Tower()
    out = _call(cache, tower, 1, 2)
    assert (
        out.pooler_output[0].untyped_storage().data_ptr() != out.pooler_output[1].untyped_storage().data_ptr()
    )


def test_rows_and_grid_must_agree() -> None:
    with pytest.raises(ValueError, match="pixel_values has 5 rows but image_grid_thw needs 4"):
        VisionCache(1 << 20).image_features(_Tower(), torch.zeros(5, 3), torch.tensor([GRID]))
    with pytest.raises(ValueError, match="pixel_values has 3 rows but image_grid_thw needs 4"):  # fewer too
        VisionCache(1 << 20).image_features(_Tower(), torch.zeros(3, 3), torch.tensor([GRID]))


def test_a_cache_of_one_byte_is_valid() -> None:
    assert VisionCache(1).capacity_bytes == 1  # any positive bound; only 0 and below are refused


def test_an_empty_image_has_a_key() -> None:
    assert image_key(torch.zeros(0, 3), (0, 1, 1)) != image_key(torch.zeros(0, 3), (0, 2, 1))


class _Model:
    def forward(self, input_ids=None, mm_encoder_outputs=None):  # type: ignore[no-untyped-def]
        return None


class _Old:
    def forward(self, input_ids=None):  # type: ignore[no-untyped-def]
        return None


def _with(base: object, cls: type = _Model) -> object:
    model = cls()
    model.model = base  # type: ignore[attr-defined]
    return model


class _Base:
    def __init__(self, merge: object = 2) -> None:
        self.visual = type("V", (), {"spatial_merge_size": merge})()

    def get_image_features(self, rows, grid):  # type: ignore[no-untyped-def]
        return None


def test_unsupported_reason_names_what_the_model_lacks() -> None:
    assert unsupported_reason(_with(_Base())) is None
    assert unsupported_reason(_Model()) == "_Model has no model.get_image_features"
    assert unsupported_reason(_with(object())) == "_Model has no model.get_image_features"
    assert unsupported_reason(_with(_Base(merge=2.0))) == "_Model has no model.visual.spatial_merge_size"
    assert "takes no mm_encoder_outputs" in unsupported_reason(_with(_Base(), _Old))


def test_an_unreadable_forward_signature_is_a_reason() -> None:
    class Odd:
        forward = 3

    odd = Odd()
    odd.model = _Base()  # type: ignore[attr-defined]
    assert unsupported_reason(odd) == "the signature of Odd.forward cannot be read"
