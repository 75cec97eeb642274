"""The screen-text columns of the selector's features (``text_*`` in :data:`FEATURE_SCHEMA`).

Per trace, :class:`TraceText` keeps, for every event ``j``, what depends only on the goal and the screens
up to ``v_j`` (computed once, when the event is first featurized): the hashed words, value tokens and
value shapes of ``v_j``'s text (:class:`~causalcache_memory.selector.screen_text.BlobText`, itself cached
per content hash), the goal coverage, the novelty against earlier screens and the name-beside-value test.
Per decision, :meth:`TraceText.fill` adds what depends on the current screen ``x_t`` and the witness
(gathers over the cached bucket ids; no BLAS, no I/O beyond the current screen's cached text). A row
without text is 0 in every column (``text_available`` included) with no mask: its bucket ids are all
padding, which every query vector leaves at 0, and its event columns are never set.

Novelty: a word of ``v_j`` is *new* when no earlier screen of the trace (``x_1``, ``v_1 .. v_{j-1}``) had
it. An event whose text was unknown when it was first featurized is read again on later decisions (the
newest :data:`RETRY` such events per decision), so text written in the background is picked up; its
novelty is then computed against every earlier screen, while later events keep the novelty they had.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from causalcache_memory.selector.schema import FEATURE_SCHEMA
from causalcache_memory.selector.screen_text import (
    SHAPE_BUCKETS,
    SHAPE_WIDTH,
    TEXT_BUCKETS,
    TEXT_WIDTH,
    BlobText,
    ScreenTextCache,
    encode_text,
    goal_names,
    label_at,
    shape_ids,
    value_shape,
    value_tokens,
    word_ids,
)

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action

__all__ = ["RETRY", "TraceText"]

#: events without text re-read per decision (newest first)
RETRY = 8
_COL = {name: i for i, (name, _) in enumerate(FEATURE_SCHEMA)}
_STATIC = (
    "text_goal_cover",
    "text_goal_names",
    "text_novel_share",
    "text_novel_goal",
    "text_values_log",
    "text_values_novel",
    "text_name_value_near",
)
_PAD_WORDS = np.full(TEXT_WIDTH, TEXT_BUCKETS, dtype=np.int32)
_PAD_SHAPES = np.full(SHAPE_WIDTH, SHAPE_BUCKETS, dtype=np.int32)


def _query(ids: np.ndarray, buckets: int) -> np.ndarray:
    """Binary vector ``(buckets + 1,)`` of the (padded) bucket ids ``ids``; the padding slot stays 0."""
    vec = np.zeros(buckets + 1, dtype=np.float32)
    vec[ids] = 1.0
    vec[buckets] = 0.0
    return vec


def _blank_rows(k: int) -> tuple[np.ndarray, ...]:
    """``k`` rows of events without text: ``(ok, words, words_n, values, values_n, shapes, static)``."""
    return (
        np.zeros(k, dtype=bool),
        np.tile(_PAD_WORDS, (k, 1)),
        np.zeros(k, np.float32),
        np.tile(_PAD_WORDS, (k, 1)),
        np.zeros(k, np.float32),
        np.tile(_PAD_SHAPES, (k, 1)),
        np.zeros((k, len(_STATIC)), np.float32),
    )


def _share(ids: np.ndarray, counts: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Per row: share of the row's bucket ids that are set in ``query`` (0 for an empty row: its ids are
    all padding)."""
    return (query[ids].sum(1) / np.maximum(counts, 1.0)).astype(np.float32)


class TraceText:
    """Text columns of one trace's events (see the module docstring). Not thread-safe: the feature
    extractor calls it under its lock, after reading the texts outside it (:meth:`read`)."""

    def __init__(self, goal: str) -> None:
        self.goal = goal
        goal_blob = encode_text(goal)
        self.goal_words = goal_blob.words
        self.goal_n = float(goal_blob.n_words)
        self.goal_vec = _query(goal_blob.words, TEXT_BUCKETS)
        names = goal_names(goal)
        self.name_set = frozenset(names)
        self.names_vec = _query(word_ids(names), TEXT_BUCKETS)
        self.names_n = float(self.names_vec.sum())  # distinct name buckets
        self.n = 0
        rows = _blank_rows(self.n)
        self.ok, self.words, self.words_n, self.values, self.values_n, self.shapes, self.static = rows
        self.first: BlobText | None = None  # x_1's text (the screen before the first action)

    # ------------------------------------------------------------------ per event (once)
    @staticmethod
    def read(cache: ScreenTextCache | None, shas: Sequence[str | None]) -> list[BlobText | None]:
        """Texts of ``shas`` (I/O; call outside the extractor's lock)."""
        return [cache.get(s) if cache is not None else None for s in shas]

    def extend(self, blobs: Sequence[BlobText | None], first: BlobText | None = None) -> None:
        """Append the rows of new events with texts ``blobs`` (``first`` = x_1's text: pass it only with
        the first events)."""
        if first is not None:
            self.first = first
        k = len(blobs)
        ok, words, words_n, values, values_n, shapes, static = _blank_rows(k)
        self.ok = np.concatenate([self.ok, ok])
        self.words = np.concatenate([self.words, words])
        self.words_n = np.concatenate([self.words_n, words_n])
        self.values = np.concatenate([self.values, values])
        self.values_n = np.concatenate([self.values_n, values_n])
        self.shapes = np.concatenate([self.shapes, shapes])
        self.static = np.concatenate([self.static, static])
        start = self.n
        self.n += k
        for i, blob in enumerate(blobs):
            if blob is not None:
                self._set(start + i, blob)

    def missing(self, n: int) -> list[int]:
        """Rows (0-based, < ``n``) still without text, newest first, at most :data:`RETRY`."""
        rows = np.flatnonzero(~self.ok[:n])[::-1][:RETRY]
        return [int(r) for r in rows]

    def fill(self, rows: Sequence[int], blobs: Sequence[BlobText | None]) -> None:
        """Set the text of rows that had none (texts that arrived after the first read)."""
        for row, blob in zip(rows, blobs, strict=True):
            if blob is not None and not self.ok[row]:
                self._set(row, blob)

    def _seen_before(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """``(words seen, values seen)``: boolean vectors over the buckets of every screen before event
        ``row``: x_1 and v_1 .. v_{row-1}."""
        words = self.words[:row][self.ok[:row]]
        values = self.values[:row][self.ok[:row]]
        if self.first is not None:
            words = np.concatenate([words, self.first.words[None]])
            values = np.concatenate([values, self.first.values[None]])
        seen_words = _query(words.ravel(), TEXT_BUCKETS).astype(bool)
        return seen_words, _query(values.ravel(), TEXT_BUCKETS).astype(bool)

    def _set(self, row: int, blob: BlobText) -> None:
        self.ok[row] = True
        self.words[row], self.words_n[row] = blob.words, blob.n_words
        self.values[row], self.values_n[row] = blob.values, blob.n_values
        self.shapes[row] = blob.shapes
        seen_words, seen_values = self._seen_before(row)
        words = blob.words[: blob.n_words]  # sorted ids, then the padding
        values = blob.values[: blob.n_values]
        new_words = words[~seen_words[words]]
        new_values = values[~seen_values[values]]
        s = self.static[row]
        s[0] = self.goal_vec[words].sum() / self.goal_n if self.goal_n else 0.0
        s[1] = self.names_vec[words].sum() / self.names_n if self.names_n else 0.0
        s[2] = len(new_words) / len(words) if len(words) else 0.0
        s[3] = self.goal_vec[new_words].sum() / self.goal_n if self.goal_n else 0.0
        s[4] = np.log1p(len(values)) / np.log(10.0)
        s[5] = len(new_values) / len(values) if len(values) else 0.0
        s[6] = float(self._name_beside_value(blob, {int(v) for v in new_values}))

    def _name_beside_value(self, blob: BlobText, new_values: set[int]) -> bool:
        """A line naming a goal name with a new value on it or on the next line."""
        lines, values = blob.line_words, blob.line_values
        for i, words in enumerate(lines):
            if words & self.name_set and any(v & new_values for v in values[i : i + 2]):
                return True
        return False

    # ------------------------------------------------------------------ per decision
    def fill_columns(
        self,
        out: np.ndarray,
        n: int,
        current: BlobText | None,
        witness: Action | None,
        current_lines: Sequence[tuple[str, Sequence[float]]] | None,
    ) -> None:
        """Write the ``text_*`` columns of rows ``0..n-1`` of ``out``, which starts at 0 (the extractor's
        rows); nothing when ``current`` is None. A witness column stays 0 when the witness has no words
        (no values)."""
        if current is None or not self.ok[:n].any():
            return
        out[:, _COL["text_available"]] = self.ok[:n]
        for i, name in enumerate(_STATIC):
            out[:, _COL[name]] = self.static[:n, i]
        cur_words = _query(current.words, TEXT_BUCKETS)
        cur_values = _query(current.values, TEXT_BUCKETS)
        inter = cur_words[self.words[:n]].sum(1)
        union = self.words_n[:n] + current.n_words - inter
        out[:, _COL["text_current_jaccard"]] = inter / np.maximum(union, 1.0)  # union 0: inter 0
        out[:, _COL["text_value_on_current"]] = _share(self.values[:n], self.values_n[:n], cur_values)
        if witness is not None:
            self._witness_columns(out, n, witness, current_lines)

    def _witness_columns(
        self, out: np.ndarray, n: int, witness: Action, lines: Sequence[tuple[str, Sequence[float]]] | None
    ) -> None:
        own = witness.text or ""
        plain = " ".join(t for t in own.split() if not any(c.isdigit() for c in t))
        label = (
            label_at(lines, witness.x, witness.y)
            if lines and witness.x is not None and witness.y is not None
            else None
        )
        words = encode_text(" ".join(p for p in (label, plain) if p))
        shapes = {value_shape(v) for v in value_tokens(own)}
        if words.n_words:
            query = _query(words.words, TEXT_BUCKETS)
            out[:, _COL["text_witness_cover"]] = query[self.words[:n]].sum(1) / words.n_words
        if shapes:
            query = _query(shape_ids(shapes), SHAPE_BUCKETS)
            out[:, _COL["text_witness_shape"]] = query[self.shapes[:n]].sum(1) / float(query.sum())
