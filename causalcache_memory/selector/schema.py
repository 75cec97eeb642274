"""The selector's feature schema: column names and order, the schema hash, the context row, and the action families.

:data:`FEATURE_SCHEMA` names every per-event column the extractor (:mod:`causalcache_memory.selector.
features`) writes, :data:`CONTEXT_SCHEMA` the state-level row of the context tower. :func:`schema_hash`
hashes both plus the hashing, thumbnail and tolerance constants, so an exported model built for another
schema is refused at load time.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from causalcache_memory.actions.model import ACTION_TYPES, POINTER_TYPES, Action
from causalcache_memory.selector.screen_text import SHAPE_BUCKETS, SHAPE_WIDTH, TEXT_BUCKETS, TEXT_WIDTH

__all__ = [
    "CHAR_BUCKETS",
    "CHAR_WIDTH",
    "CONTEXT_SCHEMA",
    "FEATURE_SCHEMA",
    "NUM_CONTEXT",
    "NUM_FEATURES",
    "POINT_TOLERANCE",
    "TEXT_FEATURES",
    "THUMB",
    "TOKEN_BUCKETS",
    "TOKEN_WIDTH",
    "TYPE_GROUPS",
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
GROUP_OF = {t: i for i, (_, members) in enumerate(TYPE_GROUPS) for t in members}
_FAMILY = {name: i for i, (name, _) in enumerate(TYPE_GROUPS)}
#: typed navigation commands (a ``type`` without a point, as command-line vocabularies express it)
_TYPED_APP = re.compile(r"^(?:open|launch|start|switch to)\s+\S")
_TYPED_NAV = re.compile(r"^(?:go\s+)?(?:back|home|undo)$")
#: keys that navigate back whatever the platform
_BACK_KEYS = {("escape",), ("back",), ("alt", "left")}
TYPE_ID = {t: i for i, t in enumerate(ACTION_TYPES)}
POINTER_IDS = np.array([TYPE_ID[t] for t in sorted(POINTER_TYPES)])

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
    (
        "app_available",
        "1 if e_j and e_{t-1} both carry an app label; the three app features above are 0 when it is 0 "
        "(real data often lacks app labels: masked, never invented; app_switch_after also needs e_{j+1}'s)",
    ),
    ("image_available", "1 if thumbnails of v_j and x_t could be read"),
    ("image_dist_current", "mean |thumb(v_j) - thumb(x_t)| over 4x4 RGB thumbnails (0..1)"),
    ("image_dist_prev", "mean |thumb(v_j) - thumb(x_j)|: how much action a_j changed the screen"),
    ("image_mean", "mean intensity of thumb(v_j) (0..1)"),
    (
        "text_available",
        "1 if the screen text of v_j and of x_t are both known; every text feature below is 0 when it is 0 "
        "(masked, never invented)",
    ),
    ("text_goal_cover", "share of the goal's distinct words that appear in the text of v_j"),
    (
        "text_goal_names",
        "share of the goal's names (capitalised words not starting a sentence) in v_j's text",
    ),
    ("text_current_jaccard", "word Jaccard of v_j's text with the current screen x_t's text"),
    (
        "text_witness_cover",
        "share of the witness's words (the label of the element under its point on x_t, else its own "
        "text without value-shaped tokens) that appear in v_j's text",
    ),
    (
        "text_witness_shape",
        "share of the shapes of the witness's value-shaped tokens (a typed 'TK-1234' has shape 'AA-9999') "
        "that some value-shaped token of v_j's text has",
    ),
    ("text_novel_share", "share of v_j's distinct words seen on no earlier screen (x_1, v_1 .. v_{j-1})"),
    ("text_novel_goal", "share of the goal's words that first appear on v_j"),
    ("text_values_log", "log(1 + number of distinct value-shaped tokens in v_j's text) / log(10)"),
    ("text_values_novel", "share of v_j's value-shaped tokens seen on no earlier screen"),
    (
        "text_name_value_near",
        "1 if a line of v_j holding a goal name has a new value-shaped token on it or on the next line "
        "(e.g. 'Desk Lamp' above 'Order #526321')",
    ),
    ("text_value_on_current", "share of v_j's value-shaped tokens also shown on the current screen x_t"),
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
#: the screen-text features (dropped together by the "no screen text" ablation)
TEXT_FEATURES: tuple[str, ...] = tuple(n for n, _ in FEATURE_SCHEMA if n.startswith("text_"))
NUM_CONTEXT = len(CONTEXT_SCHEMA)
TOKEN_BUCKETS = 256
CHAR_BUCKETS = 512
THUMB = 4
TOKEN_WIDTH = 24  # distinct summary tokens kept per event
CHAR_WIDTH = 48  # distinct character 3-grams kept per event
#: Pointer actions whose points are within this relative distance count as the same target.
POINT_TOLERANCE = 0.04


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
    text += f";tokens={TOKEN_BUCKETS}x{TOKEN_WIDTH};chars={CHAR_BUCKETS}x{CHAR_WIDTH};thumb={THUMB}"
    text += f";tol={POINT_TOLERANCE};text={TEXT_BUCKETS}x{TEXT_WIDTH};shapes={SHAPE_BUCKETS}x{SHAPE_WIDTH}"
    text += ";families=typed-nav,back-keys"
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def action_type_group(action: Action) -> int:
    """The action's family in :data:`TYPE_GROUPS`, normalised across action vocabularies.

    Every action type maps to a family (:data:`GROUP_OF`), and navigation keeps its family however it is
    expressed: a ``type`` without a point whose text is a navigation command (``open Shop``, ``go back``,
    ``go home``) is ``app`` / ``nav``, and ``key escape`` (or ``back``, ``alt+left``) is ``nav``. So a
    vocabulary the scorer never saw is not out of distribution by its verbs alone.
    """
    if action.type == "type" and action.x is None and action.text:
        text = " ".join(action.text.lower().split())
        if _TYPED_APP.match(text):
            return _FAMILY["app"]
        if _TYPED_NAV.match(text):
            return _FAMILY["nav"]
    if action.type in ("key", "hotkey") and tuple(k.lower() for k in action.keys) in _BACK_KEYS:
        return _FAMILY["nav"]
    return GROUP_OF.get(action.type, _FAMILY["end"])


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
