"""Hashed text sets and coded actions: the per-event encodings the feature extractor compares.

Summaries and goals become sets of hashed tokens and character 3-grams (bucket ids padded to a fixed
width), compared by Jaccard similarity without BLAS; actions become numeric codes (type, family, point,
argument hash) compared by :func:`match`, the vectorized action equivalence used by the witness features.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from causalcache_memory.actions.model import Action
from causalcache_memory.selector.schema import POINT_TOLERANCE, POINTER_IDS, TYPE_ID, action_type_group

__all__ = ["arg_key", "bucket_ids", "bucket_vector", "char_grams", "code", "jaccard", "match", "tokens"]

_WORD = re.compile(r"[a-z0-9]+")


def bucket_vector(items: set[str], buckets: int) -> np.ndarray:
    """Binary query vector of length ``buckets + 1`` (the last slot is the padding bucket, always 0)."""
    vec = np.zeros(buckets + 1, dtype=np.float32)
    for item in items:
        vec[zlib.crc32(item.encode()) % buckets] = 1.0
    return vec


def bucket_ids(items: set[str], buckets: int, width: int) -> np.ndarray:
    """Distinct bucket ids of ``items`` padded with ``buckets`` to ``width`` (extra items dropped)."""
    ids = sorted({zlib.crc32(item.encode()) % buckets for item in items})[:width]
    return np.array(ids + [buckets] * (width - len(ids)), dtype=np.int32)


def tokens(text: str) -> set[str]:
    """Lower-cased alphanumeric words of ``text``."""
    return set(_WORD.findall(text.lower()))


def char_grams(text: str) -> set[str]:
    """Character 3-grams of ``text`` after word normalization."""
    s = " ".join(_WORD.findall(text.lower()))
    return {s[i : i + 3] for i in range(max(0, len(s) - 2))}


def jaccard(ids: np.ndarray, counts: np.ndarray, query: np.ndarray) -> np.ndarray:
    """Jaccard ``|a∩b| / |a∪b|`` of each row's bucket set (padded ids ``(n, w)``) with a binary query.

    A gather instead of a matrix product: no BLAS call, so no thread pool on the decision path.
    """
    inter = query[ids].sum(1)
    union = counts + query.sum() - inter
    return np.where(union > 0, inter / np.maximum(union, 1.0), 0.0).astype(np.float32)


def arg_key(action: Action) -> int:
    """Hash of the non-positional arguments that equivalence compares (text, keys, direction, status)."""
    text = " ".join((action.text or "").lower().split())
    key = f"{text}|{'+'.join(sorted(k.lower() for k in action.keys))}|{action.direction}|{action.status}"
    return zlib.crc32(key.encode())


def code(action: Action) -> tuple[int, int, float, float, int]:
    """``(type id, family, x, y, argument hash)`` of ``action`` (NaN coordinates when it has no point).

    The type id serves only the equivalence test of :func:`match`; no feature encodes it (features see
    the family, :func:`~causalcache_memory.selector.schema.action_type_group`)."""
    x = float("nan") if action.x is None else float(action.x)
    y = float("nan") if action.y is None else float(action.y)
    return TYPE_ID[action.type], action_type_group(action), x, y, arg_key(action)


def match(
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
    pointer = bool(np.isin(w_type, POINTER_IDS))
    equal = same_type & (codes[:, 4] == w_arg)
    if pointer:
        equal &= dist <= POINT_TOLERANCE
    return equal, same_group, dist
