"""Scrolled regions for the incremental reader: a vertical shift found by matching pixel-row hashes.

A scrolled list or table changes every tile it covers, so the tile diff
(:mod:`~causalcache_memory.archive.ocr_incremental`) would read it whole, although most of its text only
moved. For each changed region, :func:`find_scroll` compares the *row hashes* of the previous and the new
screen over the region's changed tile columns (a row hash is a weighted sum of the row's pixels, the
same weights on every row, so equal pixel rows have equal hashes wherever they are):

1. every row whose hash occurs once among the region's old rows and once among its new rows votes for
   the shift ``dy`` that carries the old row onto the new one (blank and striped rows repeat, so they
   do not vote);
2. the shift with the most votes wins when it is not 0 and has at least ``min_votes`` votes and a
   quarter of the voting rows;
3. the *band* is the longest run of new rows ``y`` with ``new[y] == old[y + dy]`` (all rows, blank ones
   included).

:func:`scroll_split` then sorts the previous lines: those wholly inside the band's source rows move by
``-dy`` (text and box, unread); those whose rows did not change in place (a header above the list,
:func:`rows_in_place`) stay; the others, cut by the band's edge, are read again where they now are. The
rows outside the band that changed in place (the newly exposed strip) are read too. Rows inside the band
that no previous line covered held no text before and are not read.
"""

from __future__ import annotations

from typing import Any

from causalcache_memory.archive.ocr import OcrLine

__all__ = ["find_scroll", "row_strips", "rows_in_place", "scroll_split"]

_STRIP_WEIGHTS: dict[int, Any] = {}
_COL_WEIGHTS: Any = None


def _strip_weights(tile: int) -> Any:
    import numpy as np

    found = _STRIP_WEIGHTS.get(tile)
    if found is None:
        rng = np.random.default_rng(0x5C01)
        found = rng.integers(1, 2**31, size=(tile,), dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        _STRIP_WEIGHTS[tile] = found
    return found


def row_strips(rgb: Any, tile: int) -> Any:
    """``(H, ceil(W/tile))`` uint32 hashes of each pixel row's ``tile``-wide strips (row-independent)."""
    import numpy as np

    height, width = rgb.shape[:2]
    cols = -(-width // tile)
    packed = np.zeros((height, cols * tile), dtype=np.uint32)
    part = rgb.astype(np.uint32)
    packed[:, :width] = (part[:, :, 0] << 16) | (part[:, :, 1] << 8) | part[:, :, 2]
    with np.errstate(over="ignore"):
        return (packed.reshape(height, cols, tile) * _strip_weights(tile)).sum(axis=2, dtype=np.uint32)


def _row_hashes(strips: Any, y0: int, y1: int, cols: Any) -> Any:
    """Hashes of rows ``y0..y1`` of ``strips`` over the tile columns ``cols`` (weights by column index)."""
    import numpy as np

    global _COL_WEIGHTS
    if _COL_WEIGHTS is None:
        rng = np.random.default_rng(0x5C02)
        _COL_WEIGHTS = rng.integers(1, 2**31, size=(4096,), dtype=np.uint32) * np.uint32(2) + np.uint32(1)
    with np.errstate(over="ignore"):
        return (strips[y0:y1][:, cols] * _COL_WEIGHTS[np.asarray(cols) % 4096]).sum(axis=1, dtype=np.uint32)


def find_scroll(
    old: Any,
    new: Any,
    region: tuple[int, int, int, int],
    changed_cols: Any,
    *,
    min_votes: int = 8,
) -> tuple[int, int, int] | None:
    """``(dy, band_y0, band_y1)`` when ``region`` (x0, y0, x1, y1) of the new screen shows old rows shifted:
    new row ``y`` equals old row ``y + dy`` for ``band_y0 <= y < band_y1``; None when no shift is found.

    ``old``/``new``: :func:`row_strips` of the two screens; ``changed_cols``: the tile columns of the
    region whose tiles changed (the rows are hashed over these only)."""
    import numpy as np

    _, y0, _, y1 = region
    if y1 - y0 < 2 * min_votes or not len(changed_cols):
        return None
    old_rows = _row_hashes(old, y0, y1, changed_cols)
    new_rows = _row_hashes(new, y0, y1, changed_cols)
    old_vals, old_idx, old_counts = np.unique(old_rows, return_index=True, return_counts=True)
    new_vals, new_idx, new_counts = np.unique(new_rows, return_index=True, return_counts=True)
    old_once = old_vals[old_counts == 1]
    new_once = new_vals[new_counts == 1]
    common, in_old, in_new = np.intersect1d(old_once, new_once, return_indices=True)
    if not len(common):
        return None
    old_pos = old_idx[old_counts == 1][in_old]
    new_pos = new_idx[new_counts == 1][in_new]
    shifts, votes = np.unique(old_pos - new_pos, return_counts=True)
    best = int(np.argmax(votes))
    dy, top = int(shifts[best]), int(votes[best])
    if dy == 0 or top < min_votes or top * 4 < len(common):
        return None
    lo, hi = max(0, -dy), min(len(new_rows), len(old_rows) - dy)  # new rows whose source is in the region
    if hi - lo < min_votes:
        return None
    equal = new_rows[lo:hi] == old_rows[lo + dy : hi + dy]
    best_run, start = (0, 0, 0), None
    for i, same in enumerate([*equal.tolist(), False]):
        if same and start is None:
            start = i
        elif not same and start is not None:
            if i - start > best_run[0]:
                best_run = (i - start, start, i)
            start = None
    if best_run[0] < min_votes:
        return None
    return dy, y0 + lo + best_run[1], y0 + lo + best_run[2]


def rows_in_place(old: Any, new: Any, region: tuple[int, int, int, int], changed_cols: Any) -> Any:
    """``(y1 - y0,)`` bool: which rows of ``region`` are equal in the old and the new screen at the same
    place (over the tile columns ``changed_cols``; an unchanged header or a blank row)."""
    _, y0, _, y1 = region
    if not len(changed_cols):
        import numpy as np

        return np.ones(y1 - y0, dtype=bool)
    return _row_hashes(old, y0, y1, changed_cols) == _row_hashes(new, y0, y1, changed_cols)


def scroll_split(
    region: tuple[int, int, int, int],
    lines: list[OcrLine],
    dy: int,
    band: tuple[int, int],
    same: Any = None,
    *,
    gap: int = 8,
    grow: int = 12,
) -> tuple[list[OcrLine], list[OcrLine], list[tuple[int, int, int, int]]]:
    """``(moved lines, lines kept in place, regions still to read)`` of a scrolled ``region``.

    ``lines``: the previous screen's lines; ``band``: new rows ``b0 <= y < b1`` equal to old rows ``y + dy``;
    ``same``: :func:`rows_in_place` of the region (None: no row counts as unchanged). A previous line that
    touches the region is

    * *moved* (text unread, box shifted by ``-dy``) when its box lies wholly in the band's source rows;
    * *kept in place* when every row of its box's core (the middle half of its rows) is unchanged in
      place (an unchanged header above a list: its box reaches into the list's rows);
    * otherwise read again where it now is, when its middle row shifted by ``-dy`` lies in the band: the
      rows of its box shifted by ``-dy``, within the region (a line cut by the band's edge).

    The rows outside the band that changed in place (the newly exposed strip) are read too. Each row to
    read is grown by ``grow`` pixels up and down (a changed run may be a line's glyph rows only, and the
    reader takes the lines *centred* in a region: a detection box is taller than its glyphs, and not
    always evenly), rows closer than ``gap`` pixels are merged, and each run of rows becomes one region
    ``(x0, y, x1, y')``.
    """
    import numpy as np

    x0, y0, x1, y1 = region
    b0, b1 = band
    read = np.zeros(y1 - y0, dtype=bool)
    read[: max(0, b0 - y0)] = True
    read[max(0, b1 - y0) :] = True
    if same is not None:
        read &= ~np.asarray(same, dtype=bool)
    in_band = np.zeros(y1 - y0, dtype=bool)
    in_band[max(0, b0 - y0) : max(0, b1 - y0)] = True
    moved, kept = [], []
    for line in lines:
        lx0, ly0, lx1, ly1 = line.box
        if not (x0 < lx1 and lx0 < x1 and y0 < ly1 and ly0 < y1):
            continue
        if b0 + dy <= ly0 and ly1 <= b1 + dy:
            moved.append(OcrLine(line.text, (lx0, ly0 - dy, lx1, ly1 - dy)))
            continue
        inset = (ly1 - ly0) // 4  # the box's core: detection boxes reach into the rows around the text
        core = (
            same[max(0, ly0 + inset - y0) : max(0, min(y1, ly1 - inset) - y0)] if same is not None else None
        )
        if core is not None and bool(np.all(core)):
            kept.append(line)
            continue
        top, bottom, centre = ly0 - dy - y0, ly1 - dy - y0, (ly0 + ly1) // 2 - dy - y0
        if 0 <= centre < len(in_band) and in_band[centre]:  # its middle still shows, shifted
            read[max(0, top) : max(0, min(len(read), bottom))] = True
    runs: list[list[int]] = []
    for y in np.nonzero(read)[0].tolist():
        a, b = max(0, y - grow), min(len(read), y + 1 + grow)
        if runs and a - runs[-1][1] < gap:
            runs[-1][1] = b
        else:
            runs.append([a, b])
    reads = [(x0, y0 + a, x1, y0 + b) for a, b in runs if b - a >= 2]
    return moved, kept, reads
