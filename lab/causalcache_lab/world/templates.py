"""Task templates (grammar x app pair) and their fixed train / dev / eval split.

A *template* is a task's grammar plus the apps it connects, written as a string:

* ``single:<kind>><use>`` -- find one value (``kind``: order, code, room, ticket, address) in its app,
  run errands, use it (``use``: messages, quicknote, newnote, settings, browser);
* ``inapp:<kind>><use>`` -- as ``single``, but right after the read an errand in the *same* app shows
  another value of the same pattern (evidence not adjacent to an app switch; "the last one seen" is wrong);
* ``pick:<kind>>pick`` -- find a person (an event's host or a note's contact) and later pick that person
  in Messages (a tap, not typing);
* ``pair:<kind1>+<kind2>><use>`` -- two values found on two distant screens, used together;
* ``control:<family>:<variant>`` -- single-app controls (``plain`` or ``browse``: in-app errands first).

:func:`template_split` assigns every template to ``train``, ``dev`` or ``eval`` once and for all,
stratified by grammar (about 50 / 15 / 35 % of each grammar's templates, by a stable hash of the
template string -- not by any outcome). Selector and HGKV training use ``train`` (and ``dev`` for
knobs) on desktop; evaluation uses ``eval`` on mobile::

    generate_tasks(200, seed=0, platform="desktop", templates="train")   # training
    generate_tasks(60, seed=1, platform="desktop", templates="dev")      # choosing knobs
    generate_tasks(120, seed=1234, platform="mobile", templates="eval")  # evaluation
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from itertools import combinations

from causalcache_memory.errors import ConfigError

__all__ = [
    "CONTROL_FAMILIES",
    "GRAMMARS",
    "KIND_USES",
    "TEMPLATE_SPLITS",
    "all_templates",
    "template_split",
    "templates_in",
]

#: kind of remembered value -> the uses it can feed (always in another app than the value's source app)
KIND_USES: dict[str, tuple[str, ...]] = {
    "order": ("messages", "quicknote", "newnote", "browser"),
    "code": ("settings", "quicknote", "newnote"),
    "room": ("messages", "quicknote", "newnote"),
    "ticket": ("messages", "quicknote", "newnote"),
    "address": ("messages", "browser"),
}
PAIR_USES = ("messages", "quicknote")
PERSON_KINDS = ("host", "contact")
CONTROL_FAMILIES = ("send", "note", "toggle", "track", "search")
GRAMMARS = ("single", "inapp", "pick", "pair", "control")
TEMPLATE_SPLITS = ("train", "dev", "eval")
_SHARES = (0.50, 0.15)


def _grammar_templates(grammar: str) -> list[str]:
    if grammar in ("single", "inapp"):
        return [f"{grammar}:{k}>{u}" for k, uses in KIND_USES.items() for u in uses]
    if grammar == "pick":
        return [f"pick:{k}>pick" for k in PERSON_KINDS]
    if grammar == "pair":
        return [f"pair:{a}+{b}>{u}" for a, b in combinations(KIND_USES, 2) for u in PAIR_USES]
    return [f"control:{f}:{v}" for f in CONTROL_FAMILIES for v in ("plain", "browse")]


def _stable(text: str) -> str:
    return hashlib.sha256(f"causalcache-world-v2:{text}".encode()).hexdigest()


@lru_cache(maxsize=1)
def _assignment() -> dict[str, str]:
    out: dict[str, str] = {}
    for grammar in GRAMMARS:
        names = sorted(_grammar_templates(grammar), key=_stable)
        n = len(names)
        n_train = max(1, round(_SHARES[0] * n))
        n_dev = round(_SHARES[1] * n) if n >= 4 else 0
        for i, name in enumerate(names):
            out[name] = "train" if i < n_train else ("dev" if i < n_train + n_dev else "eval")
    return out


def all_templates() -> list[str]:
    """Every template of the world, sorted."""
    return sorted(_assignment())


def template_split(template: str) -> str:
    """``train``, ``dev`` or ``eval`` for ``template`` (fixed; see the module docstring)."""
    try:
        return _assignment()[template]
    except KeyError:
        raise ConfigError(f"template={template!r} is not a template of the synthetic world") from None


def templates_in(which: str, grammar: str | None = None) -> list[str]:
    """Templates of split ``which`` (``train``, ``dev``, ``eval`` or ``all``), optionally of one grammar."""
    if which not in (*TEMPLATE_SPLITS, "all"):
        raise ConfigError(f"templates={which!r} must be one of 'train', 'dev', 'eval' or 'all'")
    return [
        t
        for t, s in sorted(_assignment().items())
        if (which == "all" or s == which) and (grammar is None or t.split(":", 1)[0] == grammar)
    ]
