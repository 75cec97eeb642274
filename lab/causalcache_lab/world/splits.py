"""Splits of worlds: training, development and fixed held-out worlds, and the rule that guards them.

The rule (docs/WORLD.md, "Splits of worlds"): **nothing is chosen on held-out worlds** -- not knobs, not
thresholds, not checkpoints, not the shape of the world. Training uses training worlds; anything chosen
(rates of the simulated policy, thresholds, the shape of the family) is chosen on development worlds;
held-out worlds are only evaluated. Held-out worlds draw their knobs from value sets that include values
no training or development world can have (:data:`~causalcache_lab.world.family.KNOB_VALUES`):
an unseen action vocabulary (``command``), an unseen layout family (``airy``) and longer evidence ages
(4-6 errands after the read, evidence up to ~30 steps old).

:func:`require_not_heldout` enforces it: every harness entry that trains or calibrates calls it and
refuses held-out worlds with a :class:`~causalcache_memory.errors.ConfigError`.
"""

from __future__ import annotations

from collections.abc import Sequence

from causalcache_lab.world.family import world_spec
from causalcache_memory.errors import ConfigError

__all__ = ["PURPOSES", "WORLD_SPLITS", "require_not_heldout", "resolve_worlds", "world_split", "worlds_in"]

#: world split -> the fixed world ids of that split
WORLD_SPLITS: dict[str, tuple[str, ...]] = {
    "train": tuple(f"train-{i:02d}" for i in range(12)),
    "dev": tuple(f"dev-{i:02d}" for i in range(4)),
    "heldout": tuple(f"heldout-{i:02d}" for i in range(4)),
    #: development worlds with the held-out evidence ages, for adaptation methods only (family.py)
    "devage": tuple(f"devage-{i:02d}" for i in range(3)),
    #: development worlds with a layout of their own and the held-out ages, for adaptation methods (family.py)
    "devshift": tuple(f"devshift-{i:02d}" for i in range(3)),
    #: development worlds that navigate by typing in a vocabulary of their own, with the held-out ages (family.py)
    "devtype": tuple(f"devtype-{i:02d}" for i in range(3)),
    #: development worlds whose evidence is either recent or old (0-6 errands after the read) (family.py)
    "devmix": tuple(f"devmix-{i:02d}" for i in range(3)),
}
#: what a harness does with worlds; only ``evaluate`` may touch held-out worlds
PURPOSES = ("train", "calibrate", "evaluate")


def worlds_in(which: str) -> tuple[str, ...]:
    """World ids of split ``which`` (``train``, ``dev``, ``devage``, ``devshift``, ``devtype``, ``devmix`` or ``heldout``)."""
    try:
        return WORLD_SPLITS[which]
    except KeyError:
        raise ConfigError(f"world split {which!r} must be one of {', '.join(WORLD_SPLITS)}") from None


def world_split(world_id: str) -> str:
    """``train``, ``dev``, ``devage``, ``devshift``, ``devtype``, ``devmix``, ``heldout`` or ``v2`` for ``world_id``."""
    return world_spec(world_id).split


def resolve_worlds(text: str | Sequence[str]) -> tuple[str, ...]:
    """``train``/``dev``/``heldout``, ``v2`` or comma-separated world ids -> world ids (validated)."""
    parts = [p.strip() for p in (text.split(",") if isinstance(text, str) else text) if p.strip()]
    if not parts:
        raise ConfigError("worlds is empty; use train, dev, heldout, v2 or world ids such as heldout-00")
    out: list[str] = []
    for part in parts:
        ids = WORLD_SPLITS[part] if part in WORLD_SPLITS else (part,)
        for world_id in ids:
            world_spec(world_id)  # validates
            if world_id not in out:
                out.append(world_id)
    return tuple(out)


def require_not_heldout(worlds: Sequence[str], purpose: str) -> None:
    """Refuse to ``train`` or ``calibrate`` on held-out worlds (``evaluate`` may use any world)."""
    if purpose not in PURPOSES:
        raise ConfigError(f"purpose={purpose!r} must be one of {', '.join(PURPOSES)}")
    if purpose == "evaluate":
        return
    held = [w for w in worlds if world_split(w) == "heldout"]
    if held:
        raise ConfigError(
            f"refusing to {purpose} on held-out world(s) {', '.join(held)}: nothing is chosen on held-out "
            "worlds (docs/WORLD.md); use training worlds to train and development worlds to calibrate"
        )
