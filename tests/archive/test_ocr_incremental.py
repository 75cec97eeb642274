"""Incremental OCR (archive.ocr_incremental) and the screen-text writer's on-time rules, with a fake engine
whose "text" is in the pixels: every solid block of a non-white colour is one line, read as its colour."""

from __future__ import annotations

import io
import logging
import threading

import numpy as np
import pytest

from causalcache_memory.archive import LocalArchive
from causalcache_memory.archive.ocr import OcrLine, check_cancel, reading_order
from causalcache_memory.archive.ocr_incremental import IncrementalReader, changed_regions, tile_signatures
from causalcache_memory.archive.text_writer import ScreenTextWriter

W, H = 320, 240


class ColourOcr:
    """Lines = blocks of one non-white colour (text ``c<r>-<g>-<b>``, box = the colour's pixels)."""

    name = "colour"

    def __init__(self) -> None:
        self.crops: list[tuple[int, int]] = []
        self.screens: list[tuple[int, int] | None] = []

    def read_lines(self, image, *, cancel=None, screen=None):  # type: ignore[no-untyped-def]
        check_cancel(cancel)
        self.crops.append(image.shape[:2])
        self.screens.append(screen)
        colours = {tuple(int(v) for v in c) for c in image.reshape(-1, 3)} - {(255, 255, 255)}
        out = []
        for colour in colours:
            ys, xs = np.nonzero(np.all(image == np.array(colour, dtype=np.uint8), axis=2))
            box = (int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1)
            out.append(OcrLine("c{}-{}-{}".format(*colour), box))
        return reading_order(out)

    def read(self, image: bytes) -> str:
        from causalcache_memory.archive.ocr import decode_rgb, join_lines

        return join_lines(self.read_lines(decode_rgb(image)))


def screen(blocks: dict[tuple[int, int, int], tuple[int, int, int, int]]) -> np.ndarray:
    image = np.full((H, W, 3), 255, dtype=np.uint8)
    for colour, (x0, y0, x1, y1) in blocks.items():
        image[y0:y1, x0:x1] = colour
    return image


BASE = {(10, 0, 0): (8, 8, 100, 20), (20, 0, 0): (8, 40, 150, 52), (30, 0, 0): (200, 180, 300, 192)}


def texts(result) -> list[str]:  # type: ignore[no-untyped-def]
    return [line.text for line in result.lines]


def test_a_small_change_reads_only_its_region_and_carries_the_other_lines_with_their_boxes():
    engine = ColourOcr()
    reader = IncrementalReader(engine, tile=16)
    first = reader.read(screen(BASE), "t1")
    assert first.full and texts(first) == ["c10-0-0", "c20-0-0", "c30-0-0"]
    changed = dict(BASE)
    changed[(40, 0, 0)] = changed.pop((30, 0, 0))  # the third line's pixels change, nothing else does
    second = reader.read(screen(changed), "t1")
    assert not second.full and 0 < second.read_share < 0.2
    assert engine.crops[-1][0] * engine.crops[-1][1] < W * H / 4 and engine.screens[-1] == (W, H)
    full = ColourOcr().read_lines(screen(changed))
    assert [(ln.text, ln.box) for ln in second.lines] == [(ln.text, ln.box) for ln in full]
    assert second.relative_lines()[0] == ("c10-0-0", (8 / W, 8 / H, 100 / W, 20 / H))


def test_a_change_at_one_end_of_a_line_reads_the_whole_line_again():
    engine = ColourOcr()
    reader = IncrementalReader(engine, tile=16, margin=0)
    reader.read(screen(BASE), "t1")
    grown = dict(BASE)
    grown[(20, 0, 0)] = (8, 40, 230, 52)  # the line grows at its right end (typing)
    result = reader.read(screen(grown), "t1")
    assert not result.full
    assert [(ln.text, ln.box) for ln in result.lines if ln.text == "c20-0-0"] == [
        ("c20-0-0", (8, 40, 230, 52))
    ]


def test_too_much_change_another_size_or_no_thread_read_the_whole_screen():
    engine = ColourOcr()
    reader = IncrementalReader(engine, tile=16, full_share=0.5)
    reader.read(screen(BASE), "t1")
    assert reader.read(screen({(50, 0, 0): (0, 0, W, 200)}), "t1").full  # most of the screen changed
    assert reader.read(np.full((H + 16, W, 3), 255, dtype=np.uint8), "t1").full  # another size
    reader.read(screen(BASE), "t2")
    assert reader.read(screen(BASE), None).full  # no thread: nothing to diff against
    same = reader.read(screen(BASE), "t2")
    assert not same.full and same.read_share == 0 and texts(same) == ["c10-0-0", "c20-0-0", "c30-0-0"]


def test_threads_do_not_diff_against_each_other():
    engine = ColourOcr()
    reader = IncrementalReader(engine, tile=16)
    reader.read(screen(BASE), "a")
    other = reader.read(screen({(60, 0, 0): (8, 8, 100, 20)}), "b")
    assert other.full and texts(other) == ["c60-0-0"]


def test_tile_signatures_see_a_one_pixel_change_and_regions_merge_and_grow_to_lines():
    image = screen(BASE)
    before = tile_signatures(image, 16)
    image[100, 101, 2] ^= 1
    after = tile_signatures(image, 16)
    assert [tuple(x) for x in np.argwhere(before != after)] == [(6, 6)]
    lines = [OcrLine("long", (0, 90, 300, 110))]
    assert changed_regions(before, after, 16, (W, H), lines, margin=0) == [(0, 90, 300, 112)]
    assert changed_regions(before, before, 16, (W, H), lines, margin=0) == []


def _png(image: np.ndarray) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, format="PNG")
    return buf.getvalue()


def test_the_writer_reads_a_threads_screens_incrementally_and_keeps_their_lines(tmp_path):
    archive = LocalArchive(tmp_path / "a")
    changed = dict(BASE)
    changed[(40, 0, 0)] = changed.pop((30, 0, 0))
    shas = [archive.put(_png(screen(b))).sha256 for b in (BASE, changed)]
    writer = ScreenTextWriter(ColourOcr())
    try:
        for sha in shas:
            writer.submit(archive, sha, None, thread="t1")
            assert writer.drain(30)
    finally:
        writer.close()
    assert writer.counts["full_reads"] == 1 and writer.counts["incremental_reads"] == 1
    assert archive.get_text(shas[1]) == "c10-0-0\nc20-0-0\nc40-0-0"
    lines = writer.get_lines(shas[1])
    assert lines is not None and lines[2] == ("c40-0-0", (200 / W, 180 / H, 300 / W, 192 / H))
    assert writer.get_lines("0" * 64) is None


class Gated:
    """An engine that blocks until ``gate`` opens; ``cancellable`` ones stop when the writer closes."""

    name = "gated"

    def __init__(self, cancellable: bool) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()
        self.cancellable = cancellable

    def read_lines(self, image, *, cancel=None, screen=None):  # type: ignore[no-untyped-def]
        self.started.set()
        while not self.gate.wait(0.01):
            if self.cancellable:
                check_cancel(cancel)
        return [OcrLine("done", (0, 0, 4, 4))]


def test_at_decision_counts_ready_late_and_missing_texts(tmp_path, make_png):
    archive = LocalArchive(tmp_path / "a")
    shas = [archive.put(make_png((i, 0, 0))).sha256 for i in range(5)]
    engine = Gated(cancellable=False)
    writer = ScreenTextWriter(engine, max_pending=1)
    try:
        writer.submit(archive, shas[0], None, thread="t")
        assert engine.started.wait(30)
        writer.submit(archive, shas[1], None, thread="t")
        assert not writer.at_decision("t")  # screen 0 is still being read: late
        writer.submit(archive, shas[2], None, thread="t")  # the queue holds one: screen 1 is dropped
        engine.gate.set()
        assert writer.drain(30)
        assert not writer.at_decision("t")  # screen 1 will never have text: missing
        writer.submit(archive, shas[3], "given text", thread="t")
        writer.submit(archive, shas[4], None, thread="u")
        assert writer.drain(30)
        assert writer.at_decision("u")  # no earlier screen in thread u
    finally:
        writer.close()
    stats = writer.stats()
    assert (stats["screens_late"], stats["screens_missing"], stats["screens_ready"]) == (1, 1, 0)
    assert writer.at_decision("t") is False  # screen 1 is still missing; 2 (read) is judged ready now
    stats = writer.stats()  # screen 3 (given text) is the current one: judged at the next decision
    assert stats["screens_ready"] == 1 and stats["decisions"] == 4 and stats["decisions_text_ready"] == 1
    assert stats["dropped"] == 1 and stats["ready_share"] == pytest.approx(1 / 3, abs=1e-4)


@pytest.mark.parametrize("cancellable", [True, False])
def test_close_is_bounded_with_a_read_running_and_logs_the_timeout(tmp_path, make_png, caplog, cancellable):
    archive = LocalArchive(tmp_path / "a")
    sha = archive.put(make_png()).sha256
    engine = Gated(cancellable)
    writer = ScreenTextWriter(engine, close_timeout_s=0.2)
    writer.submit(archive, sha, None, thread="t")
    assert engine.started.wait(30)
    worker = writer._worker
    assert worker is not None and worker.daemon
    with caplog.at_level(logging.WARNING, logger="causalcache_memory"):
        stopped = writer.close()
    if cancellable:  # the read stops at its next check: close returns True, nothing is stored
        assert stopped and not worker.is_alive() and writer.counts["cancelled"] == 1
        assert not [r for r in caplog.records if "close_timeout_s" in r.getMessage()]
    else:  # the read ignores the request: close gives up after its timeout and says so
        assert not stopped and worker.is_alive() and writer.counts["close_timeouts"] == 1
        assert [r for r in caplog.records if "archive.ocr.close_timeout_s=0.2" in r.getMessage()]
        engine.gate.set()
        worker.join(30)
        assert not worker.is_alive()
    assert archive.get_text(sha) is None  # a cancelled or abandoned read stores nothing


def test_a_closed_writer_restarts_on_the_next_screen(tmp_path, make_png):
    archive = LocalArchive(tmp_path / "a")
    shas = [archive.put(make_png((i, 1, 1))).sha256 for i in range(2)]
    engine = Gated(cancellable=True)
    engine.gate.set()
    writer = ScreenTextWriter(engine)
    writer.submit(archive, shas[0], None)
    assert writer.drain(30) and writer.close()
    writer.submit(archive, shas[1], None)
    try:
        assert writer.drain(30)
    finally:
        writer.close()
    assert [archive.get_text(s) for s in shas] == ["done", "done"]


def test_a_screen_returned_to_is_diffed_against_the_remembered_screen_closest_to_it():
    engine = ColourOcr()
    reader = IncrementalReader(engine, tile=16, full_share=0.5)
    reader.read(screen(BASE), "t")
    other = {(70, 0, 0): (0, 0, W, 200)}  # another app: most of the screen
    assert reader.read(screen(other), "t").full
    back = dict(BASE)
    back[(80, 0, 0)] = back.pop((10, 0, 0))  # back to the first app, one line changed
    result = reader.read(screen(back), "t")
    assert not result.full and texts(result) == ["c80-0-0", "c20-0-0", "c30-0-0"]
    one = IncrementalReader(ColourOcr(), tile=16, full_share=0.5, bases=1)  # only the last screen kept
    one.read(screen(BASE), "t")
    one.read(screen(other), "t")
    assert one.read(screen(back), "t").full


def list_screen(first: int, rows: int = 10) -> np.ndarray:
    """A list viewport showing items ``first..first+rows-1`` (20 px apart) and one static line beside it.
    Item ``k`` is a 4-px block of its own colour, each pixel row one pixel shorter (rows differ, as text's
    rows do), so the fake engine reads it as one line ``c<5+10k>-100-0``."""
    image = screen({(30, 0, 0): (240, 100, 300, 112)})
    for i in range(rows):
        k, y = first + i, 20 + 20 * i
        for j in range(4):
            image[y + j, 20 : 200 - j] = (5 + 10 * k, 100, 0)
    return image


def test_a_scrolled_list_moves_its_lines_and_reads_only_the_newly_exposed_rows():
    engine = ColourOcr()
    reader = IncrementalReader(engine, tile=16, margin=4, scroll=True)
    reader.read(list_screen(0), "t")
    result = reader.read(list_screen(2), "t")  # scrolled by two items: 40 px up
    full = ColourOcr().read_lines(list_screen(2))
    assert not result.full and result.moved == 8
    assert [(ln.text, ln.box) for ln in result.lines] == [(ln.text, ln.box) for ln in full]
    assert all(y0 >= 160 for _, y0, _, _ in result.regions)  # only the rows below the moved items (<= 164)
    plain = IncrementalReader(ColourOcr(), tile=16, margin=4, scroll=False)
    plain.read(list_screen(0), "t")
    unscrolled = plain.read(list_screen(2), "t")
    assert unscrolled.moved == 0 and unscrolled.read_share > 2 * result.read_share
    assert texts(unscrolled) == texts(result)


def test_a_list_that_changed_without_moving_is_read_again_not_shifted():
    engine = ColourOcr()
    reader = IncrementalReader(engine, tile=16, margin=4, scroll=True)
    reader.read(list_screen(0), "t")
    other = list_screen(12)  # new items in the same rows: nothing moved
    result = reader.read(other, "t")
    assert result.moved == 0
    assert [(ln.text, ln.box) for ln in result.lines] == [
        (ln.text, ln.box) for ln in ColourOcr().read_lines(other)
    ]


def test_a_scroll_is_found_against_the_newest_screen_when_an_older_one_differs_as_little():
    reader = IncrementalReader(ColourOcr(), tile=16, margin=4, scroll=True)
    for first in (0, 2):
        reader.read(list_screen(first), "t")
    result = reader.read(list_screen(4), "t")  # as far from the screen at 0 as from the one at 2
    assert result.moved == 8 and texts(result) == [ln.text for ln in ColourOcr().read_lines(list_screen(4))]


class PaddedOcr(ColourOcr):
    """ColourOcr whose boxes reach ``pad`` pixels above and below the line's pixels (within the image), as
    a text detector's boxes do: boxes of adjacent list items touch."""

    def __init__(self, pad: int = 10) -> None:
        super().__init__()
        self.pad = pad

    def read_lines(self, image, *, cancel=None, screen=None):  # type: ignore[no-untyped-def]
        out = super().read_lines(image, cancel=cancel, screen=screen)
        height = image.shape[0]
        return [
            OcrLine(
                ln.text,
                (ln.box[0], max(0, ln.box[1] - self.pad), ln.box[2], min(height, ln.box[3] + self.pad)),
            )
            for ln in out
        ]


def header_list_screen(first: int) -> np.ndarray:
    """:func:`list_screen` with a static header 8 px above the first item."""
    image = list_screen(first)
    image[8:12, 20:120] = (200, 0, 200)
    return image


@pytest.mark.parametrize("steps", [1, 2, 3])
def test_a_scroll_loses_no_line_when_detection_boxes_reach_into_the_next_rows(steps: int):
    reader = IncrementalReader(PaddedOcr(pad=10), tile=16, margin=4, scroll=True)
    plain = IncrementalReader(PaddedOcr(pad=10), tile=16, margin=4, scroll=False)
    for reading in (reader, plain):
        reading.read(header_list_screen(0), "t")
    for k in range(1, 4):  # the moved lines of one scroll are carried into the next
        result = reader.read(header_list_screen(steps * k), "t")
        unscrolled = plain.read(header_list_screen(steps * k), "t")
        full = PaddedOcr(pad=10).read_lines(header_list_screen(steps * k))
        assert not result.full and result.moved > 0
        assert sorted(texts(result)) == sorted(ln.text for ln in full) == sorted(texts(unscrolled))
        assert result.read_share < unscrolled.read_share / 2


def test_a_screen_read_incrementally_replaces_its_base_so_two_views_stay_remembered():
    def app(colour: tuple[int, int, int], k: int) -> np.ndarray:
        blocks = {colour: (0, 0, W, 150), (k + 1, 0, 0): (8, 200, 100, 212)}
        return screen(blocks)

    reader = IncrementalReader(ColourOcr(), tile=16, full_share=0.5, bases=2)
    assert reader.read(app((90, 0, 0), 0), "t").full
    assert reader.read(app((0, 90, 0), 0), "t").full  # another app
    for k in (1, 2, 3):  # three steps in the first app again: each replaces that app's base
        assert not reader.read(app((90, 0, 0), k), "t").full
    assert not reader.read(app((0, 90, 0), 4), "t").full  # the other app is still a base


def test_closing_a_dialog_reads_nothing_and_another_app_stays_remembered():
    def app(colour: tuple[int, int, int], k: int, dialog: bool = False) -> np.ndarray:
        blocks = {colour: (0, 100, W, H), (k + 1, 0, 0): (8, 8, 100, 20)}
        if dialog:
            blocks[(0, 0, 99)] = (120, 30, 220, 70)
        return screen(blocks)

    reader = IncrementalReader(ColourOcr(), tile=16, full_share=0.5)  # 4 bases
    for image in (app((90, 0, 0), 0), app((0, 90, 0), 0), app((90, 0, 0), 1), app((90, 0, 0), 2)):
        reader.read(image, "t")
    assert not reader.read(app((90, 0, 0), 2, dialog=True), "t").full
    closed = reader.read(app((90, 0, 0), 2), "t")  # the screen before the dialog, pixel for pixel
    assert not closed.full and closed.read_share == 0.0
    assert not reader.read(app((0, 90, 0), 3), "t").full  # the other app is still a base


def test_scroll_split_moves_keeps_and_reads_each_line_by_where_its_rows_went():
    from causalcache_memory.archive._ocr_scroll import scroll_split

    same = np.zeros(200, dtype=bool)
    same[:14] = True  # a header's rows, unchanged in place
    lines = [
        OcrLine("header", (10, 0, 50, 16)),  # its box reaches 2 rows into the changed ones: kept
        OcrLine("moved", (10, 60, 50, 80)),  # inside the band's source rows 40..190: moved up 40
        OcrLine("cut", (10, 180, 50, 196)),  # crosses the source's end: read again at 140..156
        OcrLine("gone", (10, 14, 50, 30)),  # scrolled out above the band: neither kept nor read
    ]
    moved, kept, reads = scroll_split((0, 0, 100, 200), lines, 40, (0, 150), same, gap=8, grow=12)
    assert [(ln.text, ln.box) for ln in moved] == [("moved", (10, 20, 50, 40))]
    assert [ln.text for ln in kept] == ["header"]
    assert reads == [(0, 128, 100, 200)]  # "cut" at 140..156 and the exposed rows 150..200, grown by 12
