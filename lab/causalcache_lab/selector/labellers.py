"""Who labels what: the labeller of each trajectory, the refusal of the simulated policy outside its
world, and the ``source`` a labels file records (teacher-forced, agreement or evidence)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    from causalcache_lab.data.trajectory import Trajectory
    from causalcache_memory.policy import Policy

__all__ = ["SYNTHETIC_SOURCES", "check_labeller", "label_source", "policy_of"]

#: ``Trajectory.metadata["source"]`` values of synthetic-world trajectories: the only data the simulated
#: policy may label (the world's expert writes ``synthetic-expert``; episodes recorded in the world
#: are marked ``synthetic-world``)
SYNTHETIC_SOURCES = frozenset({"synthetic-expert", "synthetic-world"})


def check_labeller(policy: Any, trajectories: Sequence[Trajectory], *, force: bool = False) -> None:
    """Refuse the synthetic world's simulated policy as the labeller of anything but that world.

    The simulated policy knows only the world's screens and plans; its utilities on real screenshots
    are noise, and a selector trained on them is silently useless. ``force=True`` (``--force-labeller``)
    accepts it anyway.
    """
    from causalcache_lab.world.sim_policy import SimulatedPolicy

    if force or not isinstance(policy, SimulatedPolicy):
        return
    foreign = [t.trajectory_id for t in trajectories if t.metadata.get("source") not in SYNTHETIC_SOURCES]
    if foreign:
        shown = ", ".join(repr(i) for i in foreign[:3]) + (" …" if len(foreign) > 3 else "")
        raise ConfigError(
            f"policy: the simulated world policy ({type(policy).__name__}) cannot label "
            f"{len(foreign)} trajector{'y' if len(foreign) == 1 else 'ies'} that are not from the synthetic "
            f"world ({shown}; metadata['source'] not in {sorted(SYNTHETIC_SOURCES)}): label real data "
            "with your own policy (recipe policy.factory), or pass --force-labeller (force_labeller=True) "
            "if you really mean it"
        )


def policy_of(policy: Policy, trajectory: Trajectory) -> Policy:
    """The policy that labels ``trajectory``: ``policy.for_trajectory(trajectory)`` when the labeller
    routes per trajectory (e.g. one simulated policy per world), else ``policy`` itself."""
    route = getattr(policy, "for_trajectory", None)
    return route(trajectory) if callable(route) else policy


def label_source(labeller: Any) -> dict[str, Any]:
    """What produced a labels file: ``{"source", "model", "k", "temperature"}``.

    ``teacher_forced`` (``policy.score`` log-likelihoods) unless the labeller says otherwise through a
    ``label_source`` attribute (agreement and evidence labellers, :mod:`causalcache_lab.learn`).
    """
    src = getattr(labeller, "label_source", None)
    if isinstance(src, dict):
        return dict(src)
    name = getattr(labeller, "name", type(labeller).__name__)
    return {"source": "teacher_forced", "model": name, "k": None, "temperature": None}
