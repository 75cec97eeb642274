"""The world family: one generator with named structural knobs; a *world* is a seed for those knobs.

:class:`WorldSpec` holds every knob a world fixes:

=====================  ==============================================================================
knob                   values
=====================  ==============================================================================
``vocab``              action vocabulary (:mod:`~causalcache_lab.world.vocab`): ``touch`` (taps,
                       ``open_app`` by name, ``back``/``home``), ``keys`` (key presses and hotkeys),
                       ``slash`` (typed ``/shop``, ``/back``, ``/home``; ``devtype`` worlds only),
                       ``command`` (typed commands: ``open Shop``, ``go back``, ``go home``)
``apps``               the app set tasks use (every world keeps Shop, Messages, Notes)
``layout``             layout family of every screen: ``list`` (v2), ``inset`` (content column two cells
                       in), ``airy`` (rows spread by 5/4 and one cell in), ``stretch`` (rows spread by 9/8
                       and three cells in; ``devshift`` worlds only)
``skin``               accent colours: ``v2``, ``dusk``, ``mint``, ``mono``
``wording``            goal wording: ``plain`` (v2), ``polite`` ("Please ..."), ``terse`` ("Get ...")
``after_read``         errands between the (last) read and the use: sets the evidence age, from inside the
                       recent window (0 errands) out to about 30 steps (6 errands)
``before_read``        errands before the first read: 1-4, 1-5 or 1-6 in every split, so that the evidence
                       is not concentrated at the start of the episode (the rule of :mod:`.positions`)
``decoys``             probability that an errand shows another item of the needed pattern (None = v2's
                       uniform errand draw)
``span_controls``      share of controls whose value sits on a screen 2-3 steps back in the same app
``platform``           ``mobile`` or ``desktop``
``recency``            the simulated policy's recency mechanisms and the world's slips (missed taps,
                       keyboards that do not open; docs/WORLD.md)
=====================  ==============================================================================

:data:`V2` is world v2 exactly as RESULTS.md measured it (every knob at the value v2 had, recency off).
Family worlds are drawn by :func:`world_spec` from the value sets of their split
(:mod:`~causalcache_lab.world.splits`): held-out worlds draw from sets that include values no
training or development world can have.
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_lab.world.sim_policy import SimulatedPolicy

__all__ = ["ALL_APPS", "KNOB_VALUES", "V2", "WorldSpec", "policy_for_world", "world_spec"]

ALL_APPS = ("Shop", "Messages", "Notes", "Calendar", "Settings", "Browser", "Files")


@dataclass(frozen=True)
class WorldSpec:
    """The knobs of one world (see the module docstring)."""

    world_id: str
    split: str
    vocab: str = "touch"
    apps: tuple[str, ...] = ALL_APPS
    layout: str = "list"
    skin: str = "v2"
    wording: str = "plain"
    before_read: tuple[int, int] = (0, 3)
    after_read: tuple[int, int] = (0, 3)
    decoys: float | None = None
    span_controls: float = 0.0
    platform: str = "mobile"
    recency: bool = False

    @property
    def is_v2(self) -> bool:
        return self.world_id == "v2"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


V2 = WorldSpec("v2", "v2")

#: knob -> split -> the values a world of that split draws from. Held-out sets hold values no train/dev
#: world can draw (``command`` vocabulary, ``airy`` layout, 4-6 errands after the read).
KNOB_VALUES: dict[str, dict[str, tuple[Any, ...]]] = {
    "vocab": {"train": ("touch", "keys"), "dev": ("touch", "keys"), "heldout": ("command",)},
    "layout": {"train": ("list", "inset"), "dev": ("list", "inset"), "heldout": ("airy",)},
    "after_read": {
        "train": ((0, 1), (0, 2), (0, 3)),
        "dev": ((0, 1), (0, 2), (0, 3)),
        "heldout": ((0, 6), (2, 6), (4, 6)),
    },
    "skin": {"train": ("v2", "dusk", "mint"), "dev": ("v2", "dusk", "mint"), "heldout": ("dusk", "mono")},
    "wording": {s: ("plain", "polite", "terse") for s in ("train", "dev", "heldout")},
    # chosen on dev worlds by the position rule of :mod:`.positions` (docs/WORLD.md, "Where the evidence
    # sits"); the v2-like 0-1..0-3 put 80% of dev evidence in the first four steps
    "before_read": {s: ((1, 4), (1, 5), (1, 6)) for s in ("train", "dev", "heldout")},
    "decoys": {s: (0.2, 0.4, 0.6) for s in ("train", "dev", "heldout")},
    "span_controls": {s: (0.25, 0.5) for s in ("train", "dev", "heldout")},
    "platform": {s: ("mobile", "desktop") for s in ("train", "dev", "heldout")},
    "drop_app": {s: (None, "Files", "Settings", "Browser", "Calendar") for s in ("train", "dev", "heldout")},
}


_HELDOUT_AGES = KNOB_VALUES["after_read"]["heldout"]

#: Development splits for adaptation methods (``causalcache learn``): split -> the knobs whose values
#: differ from the development split's (every other knob draws from ``dev``). Never used to train or
#: choose anything of the bundled selector.
#:
#: * ``devage`` (RESULTS.md 9f): the held-out evidence ages. The bundled selector is near the evidence
#:   oracle on ``dev`` (its training worlds' ages), so a method meant to adapt it has nothing to gain there;
#:   ``devage`` gives it room while the held-out vocabulary and layout stay unseen.
#: * ``devshift`` (9i): and a layout no other split has, ``stretch``: a fine-tune was shown harmful out of
#:   fold on held-out worlds and on no devage world; an unseen screen shape of its own (not ``airy``).
#: * ``devtype`` (9j): and a vocabulary no other split has, ``slash``: the fine-tune shown harmful on
#:   held-out worlds swapped in typed app launches (``command`` navigates by typing); ``slash`` has that
#:   shape, a navigation step that is a ``type`` event, without the held-out words.
#: * ``devmix`` (9k): the widest held-out age range alone, 0-6 errands after the read (evidence either
#:   recent or old): the two held-out worlds where ``learn`` harmed are the two drawn with it, and no other
#:   development world had it.
ADAPTATION_SPLITS: dict[str, dict[str, tuple[Any, ...]]] = {
    "devage": {"after_read": _HELDOUT_AGES},
    "devshift": {"after_read": _HELDOUT_AGES, "layout": ("stretch",)},
    "devtype": {"after_read": _HELDOUT_AGES, "vocab": ("slash",)},
    "devmix": {"after_read": ((0, 6),)},
}
for _split, _own in ADAPTATION_SPLITS.items():
    for _knob, _values in KNOB_VALUES.items():
        _values[_split] = _own.get(_knob, _values["dev"])


def world_spec(world_id: str) -> WorldSpec:
    """The knobs of world ``world_id`` (``v2``, or ``<split>-<NN>`` of :mod:`.splits`), deterministic."""
    if world_id == "v2":
        return V2
    split, _, number = world_id.rpartition("-")
    if split not in KNOB_VALUES["vocab"] or not number.isdigit():  # the splits that have knob values
        raise ConfigError(
            f"world={world_id!r} is not a world id; use 'v2' or '<{'|'.join(KNOB_VALUES['vocab'])}>-<NN>', "
            "e.g. 'heldout-03'"
        )
    digest = hashlib.sha256(f"causalcache-world-family:{world_id}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))

    def pick(knob: str) -> Any:
        values = KNOB_VALUES[knob][split]
        return values[rng.randrange(len(values))]

    vocab, layout, after = pick("vocab"), pick("layout"), pick("after_read")
    skin, wording, before = pick("skin"), pick("wording"), pick("before_read")
    decoys, span, platform, drop = pick("decoys"), pick("span_controls"), pick("platform"), pick("drop_app")
    apps = tuple(a for a in ALL_APPS if a != drop)
    return WorldSpec(
        world_id, split, vocab, apps, layout, skin, wording, before, after, decoys, span, platform, True
    )


def policy_for_world(world_id: str, seed: int = 0) -> SimulatedPolicy:
    """The simulated policy of world ``world_id``: its action vocabulary, with the recency mechanisms of
    family worlds (v2: the v2 policy, unchanged)."""
    from causalcache_lab.world.sim_policy import SimulatedPolicy

    spec = world_spec(world_id)
    return SimulatedPolicy(seed=seed, vocab=spec.vocab, recency=spec.recency)
