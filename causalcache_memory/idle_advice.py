"""What the idle warning tells a team to do: the cause it names and the options, in order.

:class:`~causalcache_memory.decisions.stats.DecisionMonitor` counts why decisions fell back to Recent-B;
this module turns the counts into the advice of its warnings, so every warning of a memory says the same
thing about the same cause (tested: no warning contradicts another).

* **Guard (``ood``)**: names the feature group that was far (``ood_group`` of the decision records,
  :mod:`~causalcache_memory.selector.ood_explain`), then the options in order: (1) refit the guard on the
  team's own screens with ``causalcache learn`` on recorded episodes (it keeps the bundled scorer where it
  transfers and refits the guard on the team's states); (2) ``allocation.selector.ood_scale`` above 1,
  with its risk (the scorer then decides on states it was never validated on); (3)
  ``allocation.allocator: recent``, the honest choice when neither is possible. After the guard's refit
  on the memory's own first decisions (``ood_refit``, the default) "far" is said to mean far from those.
  When the far group is the
  screen text, it says the text *is* read and that removing it would not help (the missing-text warning
  sends users to add text; this one never tells them to add or remove it).
* **Time-outs / a busy worker**: raise ``allocation.selector.timeout_ms`` or give the process CPU.
* **Errors / non-finite scores**: the decision record's ``fallback`` names the exception; check the model.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

__all__ = ["GROUP_WORDS", "IDLE_DOCS", "READ_FORMATS_DOCS", "fallback_advice", "far_groups_phrase"]

#: where the idle warning sends the user: what the rule means and how to train the selector on their data
IDLE_DOCS = (
    "docs/SELECTOR.md#when-the-selector-is-idle (training on your own data: "
    "docs/DATA.md#pipeline-from-a-teams-data-to-a-deployed-adapter-and-selector)"
)
#: how accessibility dumps and desktop OCR are read (the screen-text normaliser)
READ_FORMATS_DOCS = "docs/SELECTOR.md#screen-text-from-real-formats"

#: plain words for the guard's feature groups (:data:`~causalcache_memory.selector.ood_explain.FEATURE_GROUPS`)
GROUP_WORDS: Mapping[str, str] = {
    "text": "the screen-text features (what each screen's text holds: words, values, novelty)",
    "image": "the image statistics of the screenshots",
    "app": "the app labels",
    "summary": "the one-line step summaries' overlap with the goal and the proposed action",
    "action": "the action types and their matches with the proposed action",
    "position": "the steps' ages and positions in the history",
}


def far_groups_phrase(groups: Counter[str], declined: int) -> str:
    """``"mostly in the screen-text features (... ; far group on 18 of 20 declined; then app: 2)"``."""
    if not groups:
        return "(the decision records name no far feature group: a guard without group statistics)"
    (top, n), *rest = groups.most_common()
    tail = "".join(f"; then {g}: {c}" for g, c in rest)
    return f"mostly in {GROUP_WORDS.get(top, top)} (group {top!r} on {n} of {declined} declined{tail})"


def _text_note(partial: bool) -> str:
    """What to say when the far group is the screen text (``partial``: text was missing on some decisions)."""
    where = (
        "Where screen text is given, it is what is far (where it is missing, see the missing-text warning)"
        if partial
        else "The screen text is being read (that is what is far)"
    )
    return (
        f" {where}: removing it would not help, since without text the selector gains nothing (RESULTS.md "
        "8e); if it is an accessibility dump or OCR of a whole desktop, see how it is read: "
        f"{READ_FORMATS_DOCS}."
    )


def fallback_advice(
    reason: str,
    groups: Counter[str],
    declined: int,
    *,
    text_missing: bool = False,
    allocator: str = "selector",
    refitted: bool = False,
) -> str:
    """The cause and the options of an idle warning whose main fallback reason is ``reason``.

    ``groups`` counts the far feature group of the ``declined`` guard decisions (``ood_group``);
    ``text_missing``: screen text was missing on some of the decisions the warning covers; ``allocator``:
    the configured allocator's name (a failing allocator other than the learned selector is not sent to
    the selector's model file); ``refitted``: some declines came from the guard refitted on this memory's
    own first decisions (``ood_refit``), so "far" means far from them, not from the training states.
    """
    if reason == "ood":
        top = groups.most_common(1)[0][0] if groups else None
        text_note = _text_note(text_missing) if top == "text" else ""
        far_from = (
            "this memory's own first decisions, on which the guard was refitted (allocation.selector."
            "ood_refit: the screens changed after that warm-up)"
            if refitted
            else "the selector's training states"
        )
        return (
            f"the out-of-distribution guard found these decision states far from {far_from}, "
            f"{far_groups_phrase(groups, declined)}.{text_note} Options, in order: (1) refit the guard "
            "on your own screens: record episodes with this memory and run `causalcache learn --guard-only` "
            "on them (no labels needed: it keeps the bundled scorer and refits the guard on your states; "
            "docs/LEARN.md 1b), then the full `causalcache learn` if that is not enough; (2) raise allocation.selector.ood_scale (e.g. 2.0) - risk: the scorer then "
            "decides on states it was never validated on, so check swaps against Recent-B on your own tasks "
            "before keeping it; (3) allocation.allocator: recent, the honest choice when neither is possible "
            "(the same prompts without the selector's cost, and no warning)."
        )
    if reason in ("timeout", "busy"):
        return (
            "the selector did not answer in time. Options: raise allocation.selector.timeout_ms or give the "
            "process more CPU (docs/SELECTOR.md#time-limits); or allocation.allocator: recent."
        )
    if allocator != "selector":
        return (
            f"the allocator {allocator!r} failed (the decision records' `fallback` sentence names the "
            "exception). Options: fix the allocator (its registration or its factory's arguments); or "
            "allocation.allocator: recent."
        )
    return (
        "the selector failed (the decision records' `fallback` sentence names the exception; the model file "
        "is the usual suspect). Options: fix or replace allocation.selector.model_path; or "
        "allocation.allocator: recent."
    )
