"""The ``ocr`` bench scenario's episode: 40 desktop screens with exact ground truth, and its word scores."""

from __future__ import annotations

import io
from collections import Counter

import numpy as np
import pytest

from causalcache_lab.bench.ocr_episode import desktop_episode, words
from causalcache_lab.bench.ocr_speed import word_scores


@pytest.fixture(scope="module")
def episode():
    return desktop_episode(0)


def _rgb(png: bytes) -> np.ndarray:
    from PIL import Image

    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def test_the_episode_has_40_1080p_screens_with_every_kind_of_change(episode):
    assert len(episode) == 40
    kinds = Counter(s.change for s in episode)
    assert {"typing", "dialog", "close dialog", "scroll", "switch app", "select"} <= set(kinds)
    assert all(_rgb(s.png).shape == (1080, 1920, 3) for s in episode[:3])
    assert all(0 <= s.click[0] <= 1 and 0 <= s.click[1] <= 1 for s in episode)


def test_ground_truth_lines_are_drawn_where_they_say_and_covered_lines_are_left_out(episode):
    dialog = next(s for s in episode if s.change == "dialog")
    before = episode[episode.index(dialog) - 1]
    image = _rgb(dialog.png)
    for line in dialog.lines:
        x0, y0, x1, y1 = line.box
        patch = image[y0:y1, x0:x1].reshape(-1, 3)
        assert len({tuple(p) for p in patch[:: max(1, len(patch) // 400)]}) > 1  # ink on a background
    dialog_texts = {ln.text for ln in dialog.lines}
    covered = [ln for ln in before.lines if ln.text not in dialog_texts]
    assert covered  # lines under the dialog are not in its ground truth
    dialog_box = (660, 380, 1260, 640)  # where the generator draws dialogs
    for ln in covered:  # each lies (partly) under the dialog
        assert ln.box[0] < dialog_box[2] and dialog_box[0] < ln.box[2]
        assert ln.box[1] < dialog_box[3] and dialog_box[1] < ln.box[3]


def test_consecutive_screens_differ_in_part_and_the_script_is_deterministic(episode):
    typing = [i for i, s in enumerate(episode) if s.change == "typing"][1]
    a, b = _rgb(episode[typing - 1].png), _rgb(episode[typing].png)
    changed = np.any(a != b, axis=2).mean()
    assert 0 < changed < 0.05  # typing changes a small part of the screen
    assert desktop_episode(0, steps=3)[2].png == episode[2].png
    with pytest.raises(ValueError, match="steps=41"):
        desktop_episode(0, steps=41)


def test_word_scores_count_multisets_and_normalize_case_and_punctuation():
    assert words("Total: EUR 12.50, (Shipped)") == ["total", "eur", "12.50", "shipped"]
    matched, predicted, true = word_scores(["order order lamp", "x"], ["Order, desk lamp", "x y"])
    assert (matched, predicted, true) == (2 + 1, 3 + 1, 3 + 2)


def test_cpu_by_change_groups_reads_by_the_steps_change_and_full_or_incremental():
    from causalcache_lab.bench.ocr_speed import _by_change

    reads = [
        {"change": "scroll", "full": False, "cpu_s": 0.2},
        {"change": "scroll", "full": False, "cpu_s": 0.4},
        {"change": "scroll", "full": True, "cpu_s": 0.9},
        {"change": "", "full": True, "cpu_s": 0.7},
    ]
    groups = _by_change(reads)
    assert set(groups) == {"scroll/incremental", "scroll/full", "first/full"}
    assert groups["scroll/incremental"]["n"] == 2 and groups["scroll/incremental"]["max"] == 0.4
    assert groups["scroll/full"]["median"] == 0.9
