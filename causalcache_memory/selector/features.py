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
"""

from __future__ import annotations

import hashlib
import re
import weakref
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

from causalcache_memory.actions.model import ACTION_TYPES, POINTER_TYPES, Action
from causalcache_memory.errors import ArchiveError
from causalcache_memory.summarize import summarize_action

if TYPE_CHECKING:
    from causalcache_memory.trace import Trace

__all__ = [
    "CONTEXT_SCHEMA",
    "FEATURE_SCHEMA",
    "TYPE_GROUPS",
    "FeatureExtractor",
    "ThumbnailSource",
    "action_type_group",
    "context_features",
    "feature_index",
    "schema_hash",
]

#: Coarse action families used for the witness type one-hot and type matching.
TYPE_GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("click", ("click", "double_click", "right_click", "long_press")),
    ("drag", ("drag", "swipe", "move")),
    ("scroll", ("scroll",)),
    ("type", ("type",)),
    ("key", ("key", "hotkey")),
    ("app", ("open_app",)),
    ("nav", ("back", "home")),
    ("end", ("wait", "done", "answer")),
)
_GROUP_OF = {t: i for i, (_, members) in enumerate(TYPE_GROUPS) for t in members}
_TYPE_ID = {t: i for i, t in enumerate(ACTION_TYPES)}
_POINTER_IDS = np.array([_TYPE_ID[t] for t in sorted(POINTER_TYPES)])

#: ``(name, description)`` of every event feature, in column order. Changing names or order changes
#: :func:`schema_hash` and makes trained models refuse to load.
FEATURE_SCHEMA: tuple[tuple[str, str], ...] = (
    ("age_log", "log(1 + t - j): age of the event at decision t"),
    ("age_rel", "(t - j) / (t - 1): age relative to the history length, in (0, 1]"),
    ("age_beyond_window_log", "log(1 + max(0, t - j - B)): how far the event sits outside Recent-B"),
    ("in_recent", "1 if j is in Recent-B = {t-B, ..., t-1} (recency membership)"),
    ("recent_rank", "(t - j) / B for j in Recent-B (1/B = newest), 0 otherwise (recency membership)"),
    ("is_oldest_recent", "1 if j = t - min(B, t-1): the slot a single-slot replacement displaces"),
    ("budget_norm", "B / 8"),
    ("t_log", "log(1 + t) / log(1000): decision position"),
    ("pool_frac", "min(B, t-1) / (t-1): share of the history the budget covers"),
    ("witness_present", "1 if a reference action is given"),
    ("next_available", "1 if the next action a_{j+1} is in the history (j + 1 < t)"),
    ("next_match", "1 if a_{j+1} (j + 1 < t) is equivalent to the reference action (type, arguments, point)"),
    ("next_type_match", "1 if a_{j+1} (j + 1 < t) has the reference action's type family"),
    ("own_match", "1 if a_j itself is equivalent to the reference action"),
    ("own_type_match", "1 if a_j has the reference action's type family"),
    ("next_point_dist", "distance of a_{j+1}'s point to the reference point (relative units, 1 if n/a)"),
    *(
        (f"witness_type_{name}", f"1 if the reference action is in the {name!r} family (one-hot)")
        for name, _ in TYPE_GROUPS
    ),
    *((f"event_type_{name}", f"1 if a_j is in the {name!r} family (one-hot)") for name, _ in TYPE_GROUPS),
    ("goal_token_jaccard", "token Jaccard similarity of the summary of e_j to the goal"),
    ("goal_char_jaccard", "character 3-gram Jaccard similarity (hashed) of the summary to the goal"),
    ("ref_token_jaccard", "token Jaccard of the summary of e_j to the reference action's rendering"),
    ("ref_char_jaccard", "character 3-gram Jaccard of the summary of e_j to the reference rendering"),
    ("next_ref_token_jaccard", "token Jaccard of the summary of e_{j+1} (j + 1 < t) to the reference"),
    ("app_in_goal", "1 if the event's app name occurs in the goal"),
    ("app_differs_current", "1 if the event's app differs from the app of the latest event e_{t-1}"),
    ("app_switch_after", "1 if e_{j+1} (j + 1 < t) runs in a different app than e_j"),
    ("image_available", "1 if thumbnails of v_j and x_t could be read"),
    ("image_dist_current", "mean |thumb(v_j) - thumb(x_t)| over 4x4 RGB thumbnails (0..1)"),
    ("image_dist_prev", "mean |thumb(v_j) - thumb(x_j)|: how much action a_j changed the screen"),
    ("image_mean", "mean intensity of thumb(v_j) (0..1)"),
)

#: ``(name, description)`` of the state-level context row fed to the context tower.
CONTEXT_SCHEMA: tuple[tuple[str, str], ...] = (
    ("budget_norm", "B / 8"),
    ("t_log", "log(1 + t) / log(1000)"),
    ("pool_frac", "min(B, t-1) / (t-1)"),
    ("witness_present", "1 if a reference action is given"),
    *((f"witness_type_{name}", f"reference action in the {name!r} family") for name, _ in TYPE_GROUPS),
)

NUM_FEATURES = len(FEATURE_SCHEMA)
NUM_CONTEXT = len(CONTEXT_SCHEMA)
_TOKEN_BUCKETS = 256
_CHAR_BUCKETS = 512
_THUMB = 4
_TOKEN_WIDTH = 24  # distinct summary tokens kept per event
_CHAR_WIDTH = 48  # distinct character 3-grams kept per event
#: Pointer actions whose points are within this relative distance count as the same target.
POINT_TOLERANCE = 0.04
_WORD = re.compile(r"[a-z0-9]+")


def feature_index(name: str) -> int:
    """Column of feature ``name`` in :data:`FEATURE_SCHEMA`."""
    for i, (n, _) in enumerate(FEATURE_SCHEMA):
        if n == name:
            return i
    raise KeyError(f"unknown selector feature {name!r}; known: {[n for n, _ in FEATURE_SCHEMA]}")


def schema_hash() -> str:
    """Stable hash of feature and context names and order (16 hex characters)."""
    text = (
        "events:"
        + ",".join(n for n, _ in FEATURE_SCHEMA)
        + ";context:"
        + ",".join(n for n, _ in CONTEXT_SCHEMA)
    )
    text += f";tokens={_TOKEN_BUCKETS}x{_TOKEN_WIDTH};chars={_CHAR_BUCKETS}x{_CHAR_WIDTH};thumb={_THUMB}"
    text += f";tol={POINT_TOLERANCE}"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def action_type_group(action: Action) -> int:
    return _GROUP_OF[action.type]


class ThumbnailSource(Protocol):
    """Anything with ``get(sha256) -> float32 (h, w, 3)`` array in [0, 1] (e.g. ``ThumbnailCache``)."""

    def get(self, sha256: str) -> np.ndarray: ...


# ---------------------------------------------------------------------------------------------- hashing
def _bucket_vector(items: set[str], buckets: int) -> np.ndarray:
    """Binary query vector of length ``buckets + 1`` (the last slot is the padding bucket, always 0)."""
    vec = np.zeros(buckets + 1, dtype=np.float32)
    for item in items:
        vec[zlib.crc32(item.encode()) % buckets] = 1.0
    return vec


def _bucket_ids(items: set[str], buckets: int, width: int) -> np.ndarray:
    """Distinct bucket ids of ``items`` padded with ``buckets`` to ``width`` (extra items dropped)."""
    ids = sorted({zlib.crc32(item.encode()) % buckets for item in items})[:width]
    return np.array(ids + [buckets] * (width - len(ids)), dtype=np.int32)


def _tokens(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def _char_grams(text: str) -> set[str]:
    s = " ".join(_WORD.findall(text.lower()))
    return {s[i : i + 3] for i in range(max(0, len(s) - 2))}


def _jaccard(ids: np.ndarray, counts: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Jaccard ``|a∩b| / |a∪b|`` of each row's bucket set (padded ids ``(n, w)``) with a binary query.

    A gather instead of a matrix product: no BLAS call, so no thread pool on the decision path.
    """
    inter = query[ids].sum(1)
    union = counts + query.sum() - inter
    return np.where(union > 0, inter / np.maximum(union, 1.0), 0.0).astype(np.float32)


def _arg_key(action: Action) -> int:
    """Hash of the non-positional arguments that equivalence compares (text, keys, direction, status)."""
    text = " ".join((action.text or "").lower().split())
    key = f"{text}|{'+'.join(sorted(k.lower() for k in action.keys))}|{action.direction}|{action.status}"
    return zlib.crc32(key.encode())


def _code(action: Action) -> tuple[int, int, float, float, int]:
    x = float("nan") if action.x is None else float(action.x)
    y = float("nan") if action.y is None else float(action.y)
    return _TYPE_ID[action.type], _GROUP_OF[action.type], x, y, _arg_key(action)


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
    if h % _THUMB == 0 and w % _THUMB == 0:  # area average down to _THUMB x _THUMB
        return img[..., :3].reshape(_THUMB, h // _THUMB, _THUMB, w // _THUMB, 3).mean((1, 3)).reshape(-1)
    ys = (np.arange(_THUMB) * h) // _THUMB
    xs = (np.arange(_THUMB) * w) // _THUMB
    return img[ys][:, xs, :3].reshape(-1)


# ---------------------------------------------------------------------------------------------- cache
@dataclass
class _Static:
    """Per-event quantities independent of ``t``, ``B`` and the witness (grown as the trace grows)."""

    goal: str
    goal_tokens: np.ndarray
    goal_chars: np.ndarray
    n: int = 0
    shas: list[str] | None = None
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


class FeatureExtractor:
    """Computes :data:`FEATURE_SCHEMA` rows for every event of a trace.

    Args:
        thumbnails: optional thumbnail source for the image statistics (features are 0 without one).
        drop_features: names of features forced to 0 (for ablations such as "no recency features").
    """

    def __init__(
        self, thumbnails: ThumbnailSource | None = None, *, drop_features: Sequence[str] = ()
    ) -> None:
        self.thumbnails = thumbnails
        self.drop = [feature_index(n) for n in drop_features]
        self._cache: weakref.WeakKeyDictionary[Trace, _Static] = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ static part
    def _static(self, trace: Trace) -> _Static:
        st = self._cache.get(trace)
        events = trace.events
        if (
            st is None
            or st.goal != trace.goal
            or st.n > len(events)
            or (st.n and st.shas is not None and st.shas[st.n - 1] != events[st.n - 1].screenshot)
        ):
            st = _Static(
                trace.goal,
                _bucket_vector(_tokens(trace.goal), _TOKEN_BUCKETS),
                _bucket_vector(_char_grams(trace.goal), _CHAR_BUCKETS),
            )
            self._cache[trace] = st
        if st.n < len(events):
            self._extend(st, events[st.n :])
        return st

    def _extend(self, st: _Static, new: Sequence) -> None:
        codes = np.array([_code(e.action) for e in new], dtype=np.float64).reshape(-1, 5)
        tok = np.stack([_bucket_ids(_tokens(e.summary), _TOKEN_BUCKETS, _TOKEN_WIDTH) for e in new])
        chars = np.stack([_bucket_ids(_char_grams(e.summary), _CHAR_BUCKETS, _CHAR_WIDTH) for e in new])
        thumbs, ok, prev, mean = [], [], [], []
        for e in new:
            v = _thumb(self.thumbnails, e.screenshot)
            x = _thumb(self.thumbnails, e.pre_screenshot)
            thumbs.append(v if v is not None else np.zeros(_THUMB * _THUMB * 3, np.float32))
            ok.append(v is not None)
            prev.append(float(np.abs(v - x).mean()) if v is not None and x is not None else 0.0)
            mean.append(float(v.mean()) if v is not None else 0.0)

        def cat(old: np.ndarray | None, add: np.ndarray) -> np.ndarray:
            return add if old is None else np.concatenate([old, add])

        st.codes = cat(st.codes, codes)
        st.tok = cat(st.tok, tok)
        st.tok_n = cat(st.tok_n, (tok < _TOKEN_BUCKETS).sum(1).astype(np.float32))
        st.chars = cat(st.chars, chars)
        st.chars_n = cat(st.chars_n, (chars < _CHAR_BUCKETS).sum(1).astype(np.float32))
        st.goal_tok_sim = cat(st.goal_tok_sim, _jaccard(tok, st.tok_n[-len(new) :], st.goal_tokens))
        st.goal_char_sim = cat(st.goal_char_sim, _jaccard(chars, st.chars_n[-len(new) :], st.goal_chars))
        st.thumbs = cat(st.thumbs, np.stack(thumbs).astype(np.float32))
        st.thumb_ok = cat(st.thumb_ok, np.array(ok, dtype=np.float32))
        st.img_prev = cat(st.img_prev, np.array(prev, dtype=np.float32))
        st.img_mean = cat(st.img_mean, np.array(mean, dtype=np.float32))
        goal = st.goal.lower()
        ids = np.array([zlib.crc32(e.app.lower().encode()) + 1 if e.app else 0 for e in new], dtype=np.int64)
        in_goal = np.array([bool(e.app) and e.app.lower() in goal for e in new], dtype=np.float32)
        st.app_ids = cat(st.app_ids, ids)
        st.app_in_goal = cat(st.app_in_goal, in_goal)
        st.shas = (st.shas or []) + [e.screenshot for e in new]
        st.n += len(new)

    # ------------------------------------------------------------------ per decision
    def __call__(self, trace: Trace, budget: int, witness: Action | None) -> np.ndarray:
        """Feature matrix ``(t-1, F)`` float32; row ``j-1`` describes event ``j``."""
        st = self._static(trace)
        n = trace.t - 1
        out = np.zeros((n, NUM_FEATURES), dtype=np.float32)
        if n == 0:
            return out
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
        out[:, col["next_point_dist"]] = 1.0
        if witness is not None:
            self._witness_features(out, col, st, n, nxt, witness)
        if self.drop:
            out[:, self.drop] = 0.0
        return out

    def _witness_features(self, out, col, st: _Static, n: int, nxt: np.ndarray, witness: Action) -> None:
        w_type, w_group, wx, wy, w_arg = _code(witness)
        codes = st.codes[:n]
        own_match, own_tmatch, own_dist = _match(codes, w_type, w_group, wx, wy, w_arg)
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
        ref_tok = _bucket_vector(_tokens(rendering), _TOKEN_BUCKETS)
        ref_chr = _bucket_vector(_char_grams(rendering), _CHAR_BUCKETS)
        tj = _jaccard(st.tok[:n], st.tok_n[:n], ref_tok)
        out[:, col["ref_token_jaccard"]] = tj
        out[:, col["ref_char_jaccard"]] = _jaccard(st.chars[:n], st.chars_n[:n], ref_chr)
        out[:-1, col["next_ref_token_jaccard"]] = tj[1:]

    @staticmethod
    def _app_features(out, col, st: _Static, n: int, nxt: np.ndarray) -> None:
        ids = st.app_ids[:n]
        if not ids.any():
            return
        switch = np.zeros(n, dtype=np.float32)
        switch[:-1] = ids[:-1] != ids[1:]
        out[:, col["app_in_goal"]] = st.app_in_goal[:n]
        out[:, col["app_differs_current"]] = ids != ids[-1]
        out[:, col["app_switch_after"]] = switch * nxt

    def _image_features(self, out, col, st: _Static, n: int, current: str | None) -> None:
        cur = _thumb(self.thumbnails, current)
        if cur is None:
            return
        ok = st.thumb_ok[:n]
        out[:, col["image_available"]] = ok
        out[:, col["image_dist_current"]] = np.abs(st.thumbs[:n] - cur).mean(1) * ok
        out[:, col["image_dist_prev"]] = st.img_prev[:n]
        out[:, col["image_mean"]] = st.img_mean[:n]


def _match(
    codes: np.ndarray, w_type: int, w_group: int, wx: float, wy: float, w_arg: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized full-action equivalence of each coded action with the reference.

    Equivalent = same action type, same non-positional arguments (text, keys, direction, status) and,
    for pointer actions, points within :data:`POINT_TOLERANCE` (relative units).
    Returns ``(match, same_family, point_distance)``, each ``(n,)``.
    """
    same_type = codes[:, 0] == w_type
    same_group = codes[:, 1] == w_group
    dist = np.hypot(codes[:, 2] - wx, codes[:, 3] - wy)
    dist = np.where(np.isnan(dist), 1.0, np.minimum(dist, 1.0)).astype(np.float32)
    pointer = bool(np.isin(w_type, _POINTER_IDS))
    match = same_type & (codes[:, 4] == w_arg)
    if pointer:
        match &= dist <= POINT_TOLERANCE
    return match, same_group, dist


def context_features(t: int, budget: int, witness: Action | None) -> np.ndarray:
    """The :data:`CONTEXT_SCHEMA` row ``(1, C)`` for decision ``t``."""
    n = max(t - 1, 1)
    row = np.zeros((1, NUM_CONTEXT), dtype=np.float32)
    row[0, 0] = budget / 8.0
    row[0, 1] = np.log1p(t) / np.log(1000.0)
    row[0, 2] = min(budget, t - 1) / n
    if witness is not None:
        row[0, 3] = 1.0
        row[0, 4 + action_type_group(witness)] = 1.0
    return row
