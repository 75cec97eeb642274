"""The vision cache's key tells apart every input that changes the encoder's output (issue 52, CPU only).

An image reaches the tower as ``prod(grid)`` pixel rows plus its ``(t, h, w)`` grid: the same rows under
another grid (one content at two resolutions or aspect ratios) are another image to the tower, and so are
other pixel values (content, or a processor normalising differently), another dtype and another row width
(patch size, temporal patch). Equal inputs must share one entry.
"""

from __future__ import annotations

import pytest

from causalcache_memory.runtime.vision_cache import VisionCache, image_key

torch = pytest.importorskip("torch")


class _Output:
    def __init__(self, pooler_output):  # type: ignore[no-untyped-def]
        self.pooler_output = pooler_output


class _GridTower:
    """A tower whose features depend on the rows *and* the grid (as a real one's do): per image, the
    rows' column sums times ``h``, then ``w``, one feature row per 2x2 merged patch group."""

    def __init__(self) -> None:
        self._param = torch.zeros(1)
        self.model = self
        self.encoded: list[tuple[int, int, int]] = []

    def parameters(self):  # type: ignore[no-untyped-def]
        yield self._param

    def get_image_features(self, rows, grid, return_dict=True):  # type: ignore[no-untyped-def]
        out, start = [], 0
        for t, h, w in grid.tolist():
            self.encoded.append((t, h, w))
            n = t * h * w
            feats = rows[start : start + n].sum(dim=0, keepdim=True) * h + w
            out.append(feats.repeat(max(n // 4, 1), 1))
            start += n
        return _Output(tuple(out))


ROWS = torch.arange(16 * 6, dtype=torch.float32).reshape(16, 6)


def test_one_content_under_two_grids_has_two_keys() -> None:
    assert image_key(ROWS, (1, 4, 4)) != image_key(ROWS, (1, 2, 8))
    assert image_key(ROWS, (1, 4, 4)) != image_key(ROWS, (2, 2, 4))
    assert image_key(ROWS, (1, 4, 4)) == image_key(ROWS.clone(), (1, 4, 4))


def test_one_content_at_two_resolutions_is_encoded_twice_with_its_own_features() -> None:
    cache, tower = VisionCache(1 << 20), _GridTower()
    square = cache.image_features(tower, ROWS, torch.tensor([[1, 4, 4]]))
    wide = cache.image_features(tower, ROWS, torch.tensor([[1, 2, 8]]))
    assert tower.encoded == [(1, 4, 4), (1, 2, 8)]  # the second grid is not served the first's features
    assert not torch.equal(square.pooler_output[0], wide.pooler_output[0])
    again = cache.image_features(tower, ROWS, torch.tensor([[1, 2, 8]]))
    assert tower.encoded == [(1, 4, 4), (1, 2, 8)] and torch.equal(
        again.pooler_output[0], wide.pooler_output[0]
    )
    assert cache.stats().entries == 2 and cache.stats().hits == 1


def test_two_grids_in_one_call_are_two_images() -> None:
    cache, tower = VisionCache(1 << 20), _GridTower()
    out = cache.image_features(tower, torch.cat([ROWS, ROWS]), torch.tensor([[1, 4, 4], [1, 2, 8]]))
    assert tower.encoded == [(1, 4, 4), (1, 2, 8)] and cache.stats().misses == 2
    assert not torch.equal(out.pooler_output[0], out.pooler_output[1])


@pytest.mark.parametrize(
    "changed",
    [
        ROWS + 1.0,  # other content
        ROWS.clone().index_put_((torch.tensor([15]), torch.tensor([5])), torch.tensor(0.5)),  # one value
        (ROWS - 0.5) / 0.25,  # another processor normalisation (image_mean / image_std) of the same image
        ROWS.to(torch.float64),  # another dtype
        ROWS.to(torch.bfloat16),
    ],
)
def test_the_key_changes_with_every_pixel_value_and_the_dtype(changed) -> None:
    assert image_key(changed, (1, 4, 4)) != image_key(ROWS, (1, 4, 4))


def test_the_key_changes_with_the_row_width_of_another_patch_size() -> None:
    flat = ROWS.reshape(-1)
    narrow, wide = flat.reshape(16, 6), flat.reshape(8, 12)  # same values, another patch/temporal size
    assert image_key(narrow, (1, 4, 4)) != image_key(wide, (1, 2, 4))
    assert image_key(narrow, (1, 4, 4)) != image_key(
        flat.reshape(16, 6).T.contiguous().reshape(16, 6), (1, 4, 4)
    )


def test_a_real_processor_with_other_settings_gives_other_keys() -> None:
    transformers = pytest.importorskip("transformers")
    import numpy as np

    image = (np.arange(56 * 84 * 3) % 251).astype(np.uint8).reshape(56, 84, 3)
    proc_cls = transformers.Qwen2VLImageProcessor

    def keys(**settings):  # type: ignore[no-untyped-def]
        proc = proc_cls(**settings)
        out = proc(images=[image], return_tensors="pt")
        grid = tuple(int(v) for v in out["image_grid_thw"][0])
        return image_key(out["pixel_values"], grid), grid

    base, grid = keys()
    assert keys() == (base, grid)  # the same settings: one key
    other_norm, _ = keys(image_mean=[0.5, 0.5, 0.5], image_std=[0.5, 0.5, 0.5])
    other_size, other_grid = keys(min_pixels=112 * 112, max_pixels=224 * 224)
    other_patch, _ = keys(patch_size=7)
    assert other_grid != grid
    assert len({base, other_norm, other_size, other_patch}) == 4
