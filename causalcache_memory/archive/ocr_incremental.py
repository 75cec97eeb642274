"""Incremental OCR: read only what changed since the previous screen of the same thread.

Consecutive screens of an agent differ in a few regions (a dialog, a field being typed into, a selected
row). :class:`IncrementalReader` keeps, per thread, a *tile signature* of the last views it read (4 by
default) and those screens' lines (:class:`~causalcache_memory.archive.ocr.OcrLine`, text + pixel box), and reads a new
screen of that thread as follows:

1. **Diff.** The screen is cut into ``tile x tile`` pixel tiles; each tile's signature is
   ``sum_i w_i * p_i mod 2^32`` over its pixels ``p_i`` (RGB packed into 24 bits) with fixed pseudo-random
   odd weights ``w_i``, so a tile counts as unchanged only when its signature is equal. One changed pixel
   always changes it (an odd weight times a nonzero difference below ``2^24`` is nonzero mod ``2^32``);
   several changed pixels leave it equal with chance about ``2^-32`` per tile. Memory per thread: one
   ``uint32`` per tile (8,160 tiles = 32 KiB at 1080p with 16 px tiles).
2. **Regions.** Changed tiles are grouped into 8-connected components; each component's bounding box,
   padded by ``margin`` pixels, is a region; every previous line whose box touches a region is added to
   it (its text must be read again, whole), and overlapping regions are merged, until stable.
3. **Full read when too much changed**: a screen of another size, no previous screen, or regions covering
   more than ``full_share`` of the screen are read whole. Of the thread's remembered screens, the one with
   the fewest changed tiles is the base (a screen returned to is read incrementally too).
4. **Read and carry over.** Each region is read by the engine as a crop; its lines are moved back into
   screen coordinates. Previous lines outside every region are carried over unchanged, with their boxes.
   The result is in reading order, so ``get_lines`` (relative boxes) and the witness's label lookup work
   on an incremental read as on a full one.

The pixel work (packing, signatures) is a few numpy passes over the frame (about 35 ms of CPU per 1080p
screen here), against seconds for a full read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from causalcache_memory.archive._ocr_scroll import find_scroll, row_strips, rows_in_place, scroll_split
from causalcache_memory.archive.ocr import OcrEngine, OcrLine, reading_order

__all__ = ["IncrementalReader", "ReadResult", "changed_regions", "tile_signatures"]

_WEIGHTS: dict[int, Any] = {}


def _weights(tile: int) -> Any:
    import numpy as np

    found = _WEIGHTS.get(tile)
    if found is None:
        rng = np.random.default_rng(0x0C12)
        found = rng.integers(1, 2**31, size=(tile, tile), dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        _WEIGHTS[tile] = found
    return found


def tile_signatures(rgb: Any, tile: int) -> Any:
    """``(ceil(H/tile), ceil(W/tile))`` uint32 signatures of the tiles of ``rgb`` ``(H, W, 3)`` uint8."""
    import numpy as np

    height, width = rgb.shape[:2]
    rows, cols = -(-height // tile), -(-width // tile)
    out = np.empty((rows, cols), dtype=np.uint32)
    weights = _weights(tile)[None, :, None, :]
    band = max(1, (1 << 22) // max(1, cols * tile * tile))  # tile rows per pass: ~16 MiB of uint32 at most
    for r0 in range(0, rows, band):
        r1 = min(rows, r0 + band)
        part = rgb[r0 * tile : r1 * tile].astype(np.uint32)
        packed = np.zeros(((r1 - r0) * tile, cols * tile), dtype=np.uint32)
        packed[: part.shape[0], :width] = (part[:, :, 0] << 16) | (part[:, :, 1] << 8) | part[:, :, 2]
        with np.errstate(over="ignore"):
            weighted = packed.reshape(r1 - r0, tile, cols, tile) * weights
            out[r0:r1] = weighted.sum(axis=(1, 3), dtype=np.uint32)
    return out


def _components(mask: Any) -> list[tuple[int, int, int, int]]:
    """Bounding boxes ``(r0, c0, r1, c1)`` (exclusive ends) of the 8-connected True components of ``mask``."""
    import numpy as np

    rows, cols = mask.shape
    seen = np.zeros_like(mask, dtype=bool)
    out = []
    for r, c in zip(*np.nonzero(mask), strict=True):
        if seen[r, c]:
            continue
        seen[r, c] = True
        stack, box = [(int(r), int(c))], [int(r), int(c), int(r) + 1, int(c) + 1]
        while stack:
            y, x = stack.pop()
            box = [min(box[0], y), min(box[1], x), max(box[2], y + 1), max(box[3], x + 1)]
            for dy in (-1, 0, 1):
                for dx in (-1, 0, 1):
                    ny, nx = y + dy, x + dx
                    if 0 <= ny < rows and 0 <= nx < cols and mask[ny, nx] and not seen[ny, nx]:
                        seen[ny, nx] = True
                        stack.append((ny, nx))
        out.append((box[0], box[1], box[2], box[3]))
    return out


def _touch(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _same_line(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> bool:
    """Whether boxes ``a`` and ``b`` hold (part of) the same text line: they overlap in columns and in at
    least half the rows of the shorter one. Detection boxes reach a few pixels into the rows above and
    below, so boxes of adjacent lines often touch: touching is not enough."""
    rows = min(a[3], b[3]) - max(a[1], b[1])
    return a[0] < b[2] and b[0] < a[2] and 2 * rows >= min(a[3] - a[1], b[3] - b[1])


def _union(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    return (min(a[0], b[0]), min(a[1], b[1]), max(a[2], b[2]), max(a[3], b[3]))


def changed_regions(
    old: Any, new: Any, tile: int, size: tuple[int, int], lines: list[OcrLine], margin: int
) -> list[tuple[int, int, int, int]]:
    """Pixel regions ``(x0, y0, x1, y1)`` to read again (steps 2 of the module docstring).

    ``old``/``new``: tile signatures of the previous and the new screen (same shape); ``size`` = ``(W, H)``;
    ``lines``: the previous screen's lines.
    """
    width, height = size
    regions = []
    for r0, c0, r1, c1 in _components(old != new):
        regions.append(
            (
                max(0, c0 * tile - margin),
                max(0, r0 * tile - margin),
                min(width, c1 * tile + margin),
                min(height, r1 * tile + margin),
            )
        )
    changed = True
    while changed:
        changed = False
        for i, region in enumerate(regions):
            for line in lines:
                if _touch(region, line.box) and _union(region, line.box) != region:
                    region = _union(region, line.box)
                    changed = True
            regions[i] = region
        merged: list[tuple[int, int, int, int]] = []
        for region in regions:
            for j, other in enumerate(merged):
                if _touch(region, other):
                    merged[j] = _union(region, other)
                    changed = True
                    break
            else:
                merged.append(region)
        regions = merged
    return regions


@dataclass
class ReadResult:
    """One screen's read: its lines (screen pixels), size ``(W, H)``, whether it was read whole, the
    share of the screen's pixels that went through the engine, the regions read and the lines moved by
    a scroll."""

    lines: list[OcrLine]
    size: tuple[int, int]
    full: bool
    read_share: float
    regions: list[tuple[int, int, int, int]] = field(default_factory=list)
    moved: int = 0  # lines carried over shifted from a scrolled region, unread

    def relative_lines(self) -> list[tuple[str, tuple[float, float, float, float]]]:
        return [line.relative(*self.size) for line in self.lines]


@dataclass
class _Previous:
    signatures: Any
    size: tuple[int, int]
    lines: list[OcrLine]
    strips: Any = None  # row hashes (:func:`row_strips`), kept for the thread's newest screen only
    superseded: bool = False  # a later screen was read incrementally from this one


class IncrementalReader:
    """Reads screens with ``engine``, incrementally per thread (see the module docstring).

    Args:
        engine: the OCR engine (``read_lines`` on RGB arrays).
        tile: tile side in pixels for the diff.
        full_share: read the whole screen when the changed regions cover more than this share of it.
        margin: pixels added around each changed component (context for the detector).
        max_threads: threads whose previous screens are kept (least recently used out).
        bases: screens kept per thread; a new screen is diffed against the one of them with the fewest
            changed tiles, so a screen returned to (an app switched back to, a dialog closed, screens
            read out of order when the queue serves newest first) is read incrementally too. Each
            read screen is added; a base that a later screen was read incrementally against is
            *superseded* (that view, updated, is remembered after it). When more than ``bases`` are kept, the oldest superseded one
            goes first, else the oldest, the newest two spared (a dialog closed returns to the screen
            before it): the last screen of each of the thread's recent views (apps, windows)
            outlives the steps taken within another view.
        scroll: look for vertically scrolled regions against the thread's newest screen
            (:mod:`~causalcache_memory.archive._ocr_scroll`): their moved lines are carried over shifted and
            only the rows that show new text or lines cut by the scroll's edge are read.
    """

    def __init__(
        self,
        engine: OcrEngine,
        *,
        tile: int = 16,
        full_share: float = 0.5,
        margin: int = 12,
        max_threads: int = 64,
        bases: int = 4,
        scroll: bool = True,
    ) -> None:
        self.engine = engine
        self.tile = int(tile)
        self.full_share = float(full_share)
        self.margin = int(margin)
        self.max_threads = int(max_threads)
        self.bases = max(1, int(bases))
        self.scroll = bool(scroll)
        self._previous: OrderedDict[str, list[_Previous]] = OrderedDict()
        self._lock = threading.Lock()

    def read(
        self, rgb: Any, thread: str | None = None, *, cancel: threading.Event | None = None
    ) -> ReadResult:
        """Lines of ``rgb`` ``(H, W, 3)`` uint8; ``thread`` None = a full read that remembers nothing."""
        height, width = rgb.shape[:2]
        size = (width, height)
        signatures = tile_signatures(rgb, self.tile)
        strips = row_strips(rgb, self.tile) if self.scroll and thread is not None else None
        with self._lock:
            bases = list(self._previous.get(thread, ())) if thread is not None else []
        result, similar = None, []
        same = [b for b in bases if b.size == size]
        if same:  # the remembered screen with the fewest changed tiles (an app switched back to, ...)
            changed = [int((b.signatures != signatures).sum()) for b in same]
            closest = same[changed.index(min(changed))]
            plans = []
            candidates = [closest] if closest is same[-1] else [closest, same[-1]]  # the newest finds scrolls
            for previous in candidates:
                regions = changed_regions(
                    previous.signatures, signatures, self.tile, size, previous.lines, self.margin
                )
                drops, reads, carried, moved = self._scrolled(previous, signatures, strips, regions)
                area = sum((x1 - x0) * (y1 - y0) for x0, y0, x1, y1 in reads)
                plans.append((area, previous, drops, reads, carried, moved))
            area, previous, drops, reads, carried, moved = min(plans, key=lambda plan: plan[0])
            if area <= self.full_share * width * height:
                result = self._partial(
                    rgb, previous.lines, drops, area / (width * height), cancel, reads=reads, moved=carried
                )
                result.moved = moved
                similar = [previous]
        if result is None:
            result = ReadResult(self.engine.read_lines(rgb, cancel=cancel), size, True, 1.0)
        if thread is not None:
            self._remember(thread, _Previous(signatures, size, result.lines, strips), similar)
        return result

    def _remember(self, thread: str, new: _Previous, similar: list[_Previous]) -> None:
        """Add ``new`` to ``thread``'s bases; ``similar``: the base it was read incrementally against
        (the same view before this step), now superseded. Over ``bases``, the oldest superseded base
        goes, the newest two spared, else the oldest."""
        with self._lock:
            kept = [b for b in self._previous.pop(thread, ()) if b.size == new.size]
            for base in similar:
                base.superseded = True
            for base in kept:
                base.strips = None  # row hashes of the newest screen only (H x W/tile uint32)
            kept.append(new)
            spare = min(2, self.bases - 1)
            while len(kept) > self.bases:
                old = kept[: len(kept) - spare]
                del kept[next((i for i, b in enumerate(old) if b.superseded), 0)]
            self._previous[thread] = kept
            while len(self._previous) > self.max_threads:
                self._previous.popitem(last=False)

    def _scrolled(
        self, previous: _Previous, signatures: Any, strips: Any, regions: list[tuple[int, int, int, int]]
    ) -> tuple[list[tuple[int, int, int, int]], list[tuple[int, int, int, int]], list[OcrLine], int]:
        """``(regions whose old lines go, regions to read, lines carried unread, how many of them moved)``:
        regions stacked in the same columns form a window; a scrolled window is replaced by the rows that
        :func:`~causalcache_memory.archive._ocr_scroll.scroll_split` says to read."""
        import numpy as np

        if strips is None or previous.strips is None or previous.strips.shape != strips.shape:
            return regions, regions, [], 0
        windows: list[tuple[tuple[int, int, int, int], list[tuple[int, int, int, int]]]] = []
        for region in sorted(regions, key=lambda r: r[1]):
            for i, (box, members) in enumerate(windows):
                if region[0] < box[2] and box[0] < region[2]:  # overlapping columns
                    windows[i] = (_union(box, region), [*members, region])
                    break
            else:
                windows.append((region, [region]))
        drops: list[tuple[int, int, int, int]] = []
        reads: list[tuple[int, int, int, int]] = []
        moved: list[OcrLine] = []
        stays: list[OcrLine] = []
        mask = previous.signatures != signatures
        tile = self.tile
        for window, members in windows:
            x0, y0, x1, y1 = window
            cols = np.nonzero(mask[y0 // tile : -(-y1 // tile), x0 // tile : -(-x1 // tile)].any(axis=0))[0]
            cols = cols + x0 // tile
            found = find_scroll(previous.strips, strips, window, cols)
            if found is None:
                drops.extend(members)
                reads.extend(members)
                continue
            dy, b0, b1 = found
            same = rows_in_place(previous.strips, strips, window, cols)
            shifted, stayed, rest = scroll_split(window, previous.lines, dy, (b0, b1), same, grow=self.margin)
            drops.append(window)
            moved.extend(shifted)
            stays.extend(stayed)
            reads.extend(rest)
        return drops, reads, [*moved, *stays], len(moved)

    def _partial(
        self,
        rgb: Any,
        old_lines: list[OcrLine],
        regions: list[tuple[int, int, int, int]],
        share: float,
        cancel: threading.Event | None,
        *,
        reads: list[tuple[int, int, int, int]] | None = None,
        moved: list[OcrLine] | None = None,
    ) -> ReadResult:
        """Old lines outside ``regions`` kept, ``moved`` lines added, ``reads`` (default: ``regions``) read."""
        height, width = rgb.shape[:2]
        kept = [line for line in old_lines if not any(_touch(line.box, r) for r in regions)]
        kept.extend(moved or ())
        found = []
        pad = 2 * self.margin  # context for the detector; only lines centred in the region are taken
        for x0, y0, x1, y1 in regions if reads is None else reads:
            cx0, cy0 = max(0, x0 - pad), max(0, y0 - pad)
            cx1, cy1 = min(width, x1 + pad), min(height, y1 + pad)
            for line in self.engine.read_lines(rgb[cy0:cy1, cx0:cx1], cancel=cancel, screen=(width, height)):
                bx0, by0, bx1, by1 = line.box
                box = (bx0 + cx0, by0 + cy0, bx1 + cx0, by1 + cy0)
                if x0 <= (box[0] + box[2]) / 2 < x1 and y0 <= (box[1] + box[3]) / 2 < y1:
                    found.append(OcrLine(line.text, box))
        kept = [line for line in kept if not any(_same_line(line.box, f.box) for f in found)]
        read = regions if reads is None else reads
        return ReadResult(reading_order(kept + found), (width, height), False, share, read, len(moved or ()))

    def forget(self, thread: str) -> None:
        with self._lock:
            self._previous.pop(thread, None)
