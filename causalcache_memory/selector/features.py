"""Per-event selector features, vectorized over the complete summarized history.

For decision ``t`` with budget ``B`` and a reference action ``a_ref`` (the witness: the gold target in
training, the pass-1 proposal ``a_1`` at deployment; paper, "Reference actions"), every candidate event
``j in 1..t-1`` gets the feature row documented in :data:`FEATURE_SCHEMA`, and the state gets the context
row of :data:`CONTEXT_SCHEMA`. Only events ``1..t-1`` and the current screen ``x_t`` are read: the
"next action" of event ``j`` is ``a_{j+1}`` and is used only when ``j + 1 < t``, so nothing from the
decision's own action or the episode's future enters (the target enters only as the witness).

Per-event quantities that do not depend on ``t``, ``B`` or the witness (hashed token/char n-gram sets,
action codes, thumbnail statistics) are computed once per event and cached per trace, so a decision on a
growing trace only featurizes its new events plus a few numpy operations over all of them.

The schema (names, order, hash, context row) lives in :mod:`causalcache_memory.selector.schema` and the
text/action encodings in :mod:`causalcache_memory.selector.encoding`; both are re-exported here.
"""

from __future__ import annotations

import threading
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

import numpy as np

from causalcache_memory.errors import ArchiveError
from causalcache_memory.selector.encoding import (
    bucket_ids,
    bucket_vector,
    char_grams,
    code,
    jaccard,
    match,
    tokens,
)
from causalcache_memory.selector.schema import (
    CHAR_BUCKETS,
    CHAR_WIDTH,
    CONTEXT_SCHEMA,
    FEATURE_SCHEMA,
    NUM_CONTEXT,
    NUM_FEATURES,
    POINT_TOLERANCE,
    THUMB,
    TOKEN_BUCKETS,
    TOKEN_WIDTH,
    TYPE_GROUPS,
    action_type_group,
    context_features,
    feature_index,
    schema_hash,
)
from causalcache_memory.selector.screen_text import ScreenTextCache, ScreenTextSource
from causalcache_memory.selector.text_features import TraceText
from causalcache_memory.summarize import summarize_action

if TYPE_CHECKING:
    from causalcache_memory.actions.model import Action
    from causalcache_memory.trace import Trace
    from causalcache_memory.trace.events import Event

__all__ = [
    "CONTEXT_SCHEMA",
    "FEATURE_SCHEMA",
    "NUM_CONTEXT",
    "NUM_FEATURES",
    "POINT_TOLERANCE",
    "TYPE_GROUPS",
    "FeatureExtractor",
    "ScreenTextSource",
    "ThumbnailSource",
    "action_type_group",
    "context_features",
    "feature_index",
    "schema_hash",
]


class ThumbnailSource(Protocol):
    """Anything with ``get(sha256) -> float32 (h, w, 3)`` array in [0, 1] (e.g. ``ThumbnailCache``)."""

    def get(self, sha256: str) -> np.ndarray: ...


def _thumb(source: ThumbnailSource | None, sha: str | None) -> np.ndarray | None:
    if source is None or sha is None:
        return None
    try:
        img = np.asarray(source.get(sha), dtype=np.float32)
    except (
        ArchiveError,
        KeyError,
        OSError,
        ValueError,
    ):  # a missing/corrupt thumbnail only disables image features
        return None
    h, w = img.shape[:2]
    if h % THUMB == 0 and w % THUMB == 0:  # area average down to THUMB x THUMB
        return img[..., :3].reshape(THUMB, h // THUMB, THUMB, w // THUMB, 3).mean((1, 3)).reshape(-1)
    ys = (np.arange(THUMB) * h) // THUMB
    xs = (np.arange(THUMB) * w) // THUMB
    return img[ys][:, xs, :3].reshape(-1)


# ---------------------------------------------------------------------------------------------- cache
#: traces (episode, goal) whose per-event rows are kept between decisions, least recently used dropped
CACHED_TRACES = 256


def _agree(events: Sequence[Event], seen: tuple[Event, ...]) -> bool:
    """Whether ``events`` and ``seen`` (the events cached rows describe) agree on their common prefix:
    equal events, not the same objects, since a trace loaded from a store is rebuilt at every step; a
    forked trace does not agree, a rewound one does (the rows are per event, and a decision reads the
    first ``t - 1``)."""
    m = min(len(events), len(seen))
    return all(a is b or a == b for a, b in zip(events[:m], seen[:m], strict=True))


@dataclass
class _Static:
    """Per-event quantities independent of ``t``, ``B`` and the witness (grown as the trace grows)."""

    goal: str
    goal_tokens: np.ndarray
    goal_chars: np.ndarray
    n: int = 0
    events: tuple[
        Event, ...
    ] = ()  # the events the rows were computed from (a later trace must start with them)
    codes: np.ndarray | None = None  # (n, 5) float64: type id, group, x, y, arg key
    tok: np.ndarray | None = None  # (n, TOKEN_WIDTH) bucket ids
    tok_n: np.ndarray | None = None
    chars: np.ndarray | None = None
    chars_n: np.ndarray | None = None
    app_ids: np.ndarray | None = None  # (n,) hash of the app name + 1, 0 when unknown
    app_in_goal: np.ndarray | None = None
    goal_tok_sim: np.ndarray | None = None
    goal_char_sim: np.ndarray | None = None
    thumbs: np.ndarray | None = None  # (n, 48)
    thumb_ok: np.ndarray | None = None
    img_prev: np.ndarray | None = None
    img_mean: np.ndarray | None = None
    text: TraceText | None = None


class _Grown(Protocol):
    """A :class:`_Static` that holds at least one event: every per-event array is set (``n`` rows)."""

    n: int
    events: tuple[Event, ...]
    codes: np.ndarray
    tok: np.ndarray
    tok_n: np.ndarray
    chars: np.ndarray
    chars_n: np.ndarray
    app_ids: np.ndarray
    app_in_goal: np.ndarray
    goal_tok_sim: np.ndarray
    goal_char_sim: np.ndarray
    thumbs: np.ndarray
    thumb_ok: np.ndarray
    img_prev: np.ndarray
    img_mean: np.ndarray
    text: TraceText | None


def _grown(st: _Static) -> _Grown:
    """``st`` as :class:`_Grown`: :meth:`FeatureExtractor._extend` sets every array with the first event."""
    if st.n == 0 or st.codes is None:
        raise AssertionError("the feature cache holds no event")
    return cast(_Grown, st)


class FeatureExtractor:
    """Computes :data:`FEATURE_SCHEMA` rows for every event of a trace.

    Args:
        thumbnails: optional thumbnail source for the image statistics (features are 0 without one).
        screen_text: optional source of each screenshot's text (``get_text(sha256) -> str | None``, e.g.
            an archive that stores screen text) for the ``text_*`` features, or a
            :class:`ScreenTextCache` around one; without it (or where a screen's text is unknown) they are
            0 and ``text_available`` says so.
        drop_features: names of features forced to 0 (for ablations such as "no recency features").
    """

    def __init__(
        self,
        thumbnails: ThumbnailSource | None = None,
        *,
        screen_text: ScreenTextSource | ScreenTextCache | None = None,
        drop_features: Sequence[str] = (),
    ) -> None:
        self.thumbnails = thumbnails
        if screen_text is None or isinstance(screen_text, ScreenTextCache):
            self.screen_text = screen_text
        else:
            self.screen_text = ScreenTextCache(screen_text)
        self.drop = [feature_index(n) for n in drop_features]
        # keyed by episode and goal, not by the Trace object: an integration that loads the trace from
        # its store builds a new Trace every step, which would recompute every event's rows each step
        self._cache: OrderedDict[tuple[str, str], _Static] = OrderedDict()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ static part
    def _static(self, trace: Trace) -> _Static:
        """The trace's cached per-event quantities, extended to every event of ``trace``.

        Thumbnail reads (possibly slow: a PNG decode, an archive round trip) run outside the extractor's
        lock; the lock only guards the cache and the append of the computed rows, which is skipped when
        another thread extended the same trace meanwhile. A stalled read therefore blocks only the call
        that made it.
        """
        events = trace.events
        key = (trace.episode_id, trace.goal)
        with self._lock:
            st = self._cache.get(key)
            if st is None or not _agree(events, st.events):
                st = self._cache[key] = self._fresh(trace)
            self._cache.move_to_end(key)
            while len(self._cache) > CACHED_TRACES:
                self._cache.popitem(last=False)
        while True:
            with self._lock:
                if not _agree(events, st.events):  # grown meanwhile by a call on another fork
                    st = self._fresh(trace)  # this call's own rows, not cached
                start = st.n
            if start >= len(events):
                return st
            new = events[start:]
            images = self._images(new)
            texts = TraceText.read(self.screen_text, [e.screenshot for e in new])
            first = TraceText.read(self.screen_text, [events[0].pre_screenshot])[0] if start == 0 else None
            with self._lock:
                if st.n == start:
                    self._extend(st, new, images)
                    assert st.text is not None
                    st.text.extend(texts, first)

    @staticmethod
    def _fresh(trace: Trace) -> _Static:
        return _Static(
            trace.goal,
            bucket_vector(tokens(trace.goal), TOKEN_BUCKETS),
            bucket_vector(char_grams(trace.goal), CHAR_BUCKETS),
            text=TraceText(trace.goal),
        )

    def _images(self, new: Sequence) -> tuple[list[np.ndarray], list[bool], list[float], list[float]]:
        """Thumbnail statistics of new events: ``(thumbs, ok, prev distance, mean)`` (reads pixels)."""
        thumbs, ok, prev, mean = [], [], [], []
        for e in new:
            v = _thumb(self.thumbnails, e.screenshot)
            x = _thumb(self.thumbnails, e.pre_screenshot)
            thumbs.append(v if v is not None else np.zeros(THUMB * THUMB * 3, np.float32))
            ok.append(v is not None)
            prev.append(float(np.abs(v - x).mean()) if v is not None and x is not None else 0.0)
            mean.append(float(v.mean()) if v is not None else 0.0)
        return thumbs, ok, prev, mean

    def _extend(self, st: _Static, new: Sequence, images: tuple) -> None:
        """Append the rows of ``new`` events to ``st`` (call under the lock; no I/O here)."""
        thumbs, ok, prev, mean = images
        codes = np.array([code(e.action) for e in new], dtype=np.float64).reshape(-1, 5)
        tok = np.stack([bucket_ids(tokens(e.summary), TOKEN_BUCKETS, TOKEN_WIDTH) for e in new])
        chars = np.stack([bucket_ids(char_grams(e.summary), CHAR_BUCKETS, CHAR_WIDTH) for e in new])

        def cat(old: np.ndarray | None, add: np.ndarray) -> np.ndarray:
            return add if old is None else np.concatenate([old, add])

        st.codes = cat(st.codes, codes)
        st.tok = cat(st.tok, tok)
        st.tok_n = cat(st.tok_n, (tok < TOKEN_BUCKETS).sum(1).astype(np.float32))
        st.chars = cat(st.chars, chars)
        st.chars_n = cat(st.chars_n, (chars < CHAR_BUCKETS).sum(1).astype(np.float32))
        st.goal_tok_sim = cat(st.goal_tok_sim, jaccard(tok, st.tok_n[-len(new) :], st.goal_tokens))
        st.goal_char_sim = cat(st.goal_char_sim, jaccard(chars, st.chars_n[-len(new) :], st.goal_chars))
        st.thumbs = cat(st.thumbs, np.stack(thumbs).astype(np.float32))
        st.thumb_ok = cat(st.thumb_ok, np.array(ok, dtype=np.float32))
        st.img_prev = cat(st.img_prev, np.array(prev, dtype=np.float32))
        st.img_mean = cat(st.img_mean, np.array(mean, dtype=np.float32))
        goal = st.goal.lower()
        ids = np.array([zlib.crc32(e.app.lower().encode()) + 1 if e.app else 0 for e in new], dtype=np.int64)
        in_goal = np.array([bool(e.app) and e.app.lower() in goal for e in new], dtype=np.float32)
        st.app_ids = cat(st.app_ids, ids)
        st.app_in_goal = cat(st.app_in_goal, in_goal)
        st.events = st.events + tuple(new)
        st.n += len(new)

    # ------------------------------------------------------------------ per decision
    def __call__(self, trace: Trace, budget: int, witness: Action | None) -> np.ndarray:
        """Feature matrix ``(t-1, F)`` float32; row ``j-1`` describes event ``j``."""
        static = self._static(trace)
        n = trace.t - 1
        out = np.zeros((n, NUM_FEATURES), dtype=np.float32)
        if n == 0:
            return out
        st = _grown(static)
        t = n + 1
        j = np.arange(1, t, dtype=np.float32)
        age = t - j
        size = min(budget, n)
        col = {name: i for i, (name, _) in enumerate(FEATURE_SCHEMA)}
        recent = age <= size
        out[:, col["age_log"]] = np.log1p(age)
        out[:, col["age_rel"]] = age / n
        out[:, col["age_beyond_window_log"]] = np.log1p(np.maximum(0.0, age - budget))
        out[:, col["in_recent"]] = recent
        out[:, col["recent_rank"]] = np.where(recent, age / max(budget, 1), 0.0)
        out[:, col["is_oldest_recent"]] = (age == size) & (size > 0)
        out[:, col["budget_norm"]] = budget / 8.0
        out[:, col["t_log"]] = np.log1p(t) / np.log(1000.0)
        out[:, col["pool_frac"]] = size / n
        codes = st.codes[:n]
        nxt = np.zeros(n, dtype=bool)
        nxt[:-1] = True  # a_{j+1} exists in the history only for j + 1 <= t - 1
        out[:, col["next_available"]] = nxt
        g = np.eye(len(TYPE_GROUPS), dtype=np.float32)[codes[:, 1].astype(int)]
        out[:, col["event_type_click"] : col["event_type_click"] + len(TYPE_GROUPS)] = g
        out[:, col["goal_token_jaccard"]] = st.goal_tok_sim[:n]
        out[:, col["goal_char_jaccard"]] = st.goal_char_sim[:n]
        self._app_features(out, col, st, n, nxt)
        self._image_features(out, col, st, n, trace.current_screenshot)
        if self.screen_text is not None:
            self._text_features(out, st, n, trace.current_screenshot, witness)
        out[:, col["next_point_dist"]] = 1.0
        if witness is not None:
            self._witness_features(out, col, st, n, nxt, witness)
        if self.drop:
            out[:, self.drop] = 0.0
        return out

    def _witness_features(self, out, col, st: _Grown, n: int, nxt: np.ndarray, witness: Action) -> None:
        w_type, w_group, wx, wy, w_arg = code(witness)
        codes = st.codes[:n]
        own_match, own_tmatch, own_dist = match(codes, w_type, w_group, wx, wy, w_arg)
        next_match = np.zeros(n, dtype=bool)
        next_tmatch = np.zeros(n, dtype=bool)
        next_dist = np.ones(n, dtype=np.float32)
        next_match[:-1] = own_match[1:]
        next_tmatch[:-1] = own_tmatch[1:]
        next_dist[:-1] = own_dist[1:]
        out[:, col["witness_present"]] = 1.0
        out[:, col["own_match"]] = own_match
        out[:, col["own_type_match"]] = own_tmatch
        out[:, col["next_match"]] = next_match & nxt
        out[:, col["next_type_match"]] = next_tmatch & nxt
        out[:, col["next_point_dist"]] = next_dist
        out[:, col["witness_type_click"] + int(w_group)] = 1.0
        rendering = summarize_action(witness)
        ref_tok = bucket_vector(tokens(rendering), TOKEN_BUCKETS)
        ref_chr = bucket_vector(char_grams(rendering), CHAR_BUCKETS)
        tj = jaccard(st.tok[:n], st.tok_n[:n], ref_tok)
        out[:, col["ref_token_jaccard"]] = tj
        out[:, col["ref_char_jaccard"]] = jaccard(st.chars[:n], st.chars_n[:n], ref_chr)
        out[:-1, col["next_ref_token_jaccard"]] = tj[1:]

    def _text_features(
        self, out: np.ndarray, st: _Grown, n: int, current: str | None, witness: Action | None
    ) -> None:
        """The ``text_*`` columns (:mod:`~causalcache_memory.selector.text_features`); reads outside the lock."""
        cache, text = self.screen_text, st.text
        assert cache is not None and text is not None
        cur = cache.get(current)
        if cur is None:
            return  # no text for the current screen: every text feature is masked, nothing else to read
        rows = text.missing(n)
        if rows:
            blobs = TraceText.read(cache, [st.events[r].screenshot for r in rows])
            if any(b is not None for b in blobs):
                with self._lock:
                    text.fill(rows, blobs)
        lines = cache.lines(current) if witness is not None and witness.x is not None else None
        text.fill_columns(out, n, cur, witness, lines)

    @staticmethod
    def _app_features(out, col, st: _Grown, n: int, nxt: np.ndarray) -> None:
        """App features, masked per event by ``app_available`` (0 = an app label is missing)."""
        ids = st.app_ids[:n]
        if not ids.any() or not ids[-1]:
            return  # no labels, or the latest event has none: nothing to compare against
        known = ids > 0
        switch = np.zeros(n, dtype=np.float32)
        switch[:-1] = (ids[:-1] != ids[1:]) & known[1:]
        out[:, col["app_available"]] = known
        out[:, col["app_in_goal"]] = st.app_in_goal[:n] * known
        out[:, col["app_differs_current"]] = (ids != ids[-1]) & known
        out[:, col["app_switch_after"]] = switch * nxt * known

    def _image_features(self, out, col, st: _Grown, n: int, current: str | None) -> None:
        cur = _thumb(self.thumbnails, current)
        if cur is None:
            return
        ok = st.thumb_ok[:n]
        out[:, col["image_available"]] = ok
        out[:, col["image_dist_current"]] = np.abs(st.thumbs[:n] - cur).mean(1) * ok
        out[:, col["image_dist_prev"]] = st.img_prev[:n]
        out[:, col["image_mean"]] = st.img_mean[:n]
