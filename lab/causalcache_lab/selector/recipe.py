"""The selector recipe: one YAML file driving ``causalcache label|train|eval`` for the selector.

Sections (all validated, every error reported at once)::

    setup:    {factory: "pkg.module:function", kwargs: {...}}   # optional: returns an object or mapping
                                                                 # with trajectories / archive / policy
    data:     {trajectories: path.jsonl} | {factory: ..., kwargs: ...}
    archive:  {url: /path/or/url} | {factory: ..., kwargs: ...}
    policy:   {factory: ..., kwargs: ...}                         # the labeller: any Policy
    labels:   {output: labels.jsonl, ...LabelConfig}
    train:    {output_dir: DIR, description: "...", no_recency_output_dir: DIR2, ...TrainConfig}
    ladder:   {json: ladder.json, ...LadderConfig}

A ``factory`` is an import path ``module:callable`` called with ``kwargs``: a recipe runs code, so trust
it as code. Only modules of this project, or modules the user trusts explicitly (``--trust-module``,
``CAUSALCACHE_TRUSTED_MODULES``), may be named; anything else is refused when the recipe is loaded
(:mod:`causalcache_memory.config.trusted`). Values from ``data``/``archive``/``policy`` override those of
``setup``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, PrivateAttr, ValidationError

from causalcache_lab.selector.labels import LabelConfig
from causalcache_lab.trust import lab_trusted_modules
from causalcache_memory.config.loader import refuse_foreign, show_key
from causalcache_memory.config.trusted import factory_error, resolve_factory
from causalcache_memory.errors import ConfigError
from causalcache_memory.selector.screen_text import archive_screen_text

__all__ = ["ComponentSpec", "Recipe", "Resolved", "load_recipe", "resolve"]

#: the recurrence/recency features dropped by the "no recency features" ladder rung
RECENCY_FEATURES = ("in_recent", "recent_rank", "is_oldest_recent")


class ComponentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    factory: str
    kwargs: dict[str, Any] = {}


class DataSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    trajectories: str | None = None
    factory: str | None = None
    kwargs: dict[str, Any] = {}
    #: label and train on successful trajectories only (the paper's training data); real datasets
    #: imported with ``causalcache data import`` also hold failed episodes
    successful_only: bool = True


class ArchiveSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str | None = None
    factory: str | None = None
    kwargs: dict[str, Any] = {}


class LabelsSection(LabelConfig):
    output: str = "runs/selector/labels.jsonl"

    def label_config(self) -> LabelConfig:
        return LabelConfig(**self.model_dump(exclude={"output"}))


class TrainSection(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    output_dir: str = "runs/selector/model"
    description: str = ""
    no_recency_output_dir: str | None = None
    #: where to train the "no screen text" ablation (the ``text_*`` features dropped), if anywhere
    no_text_output_dir: str | None = None
    #: thumbnail statistics as features (off by default: measured no better, and they cost a PNG decode
    #: per screenshot at deployment; RESULTS.md)
    image_features: bool = False


class LadderSection(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)
    json_path: str | None = None
    split: str = "test"


class Recipe(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    setup: ComponentSpec | None = None
    data: DataSpec = DataSpec()
    archive: ArchiveSpec = ArchiveSpec()
    policy: ComponentSpec | None = None
    labels: LabelsSection = LabelsSection()
    train: TrainSection = TrainSection()
    ladder: LadderSection = LadderSection()
    #: the modules this recipe's factories may name (set by :func:`load_recipe`; never from the file)
    _trusted: tuple[str, ...] = PrivateAttr(default=())

    def factories(self) -> dict[str, str]:
        """``{field: "module:callable"}`` of every factory the recipe names."""
        named = {"setup": self.setup, "data": self.data, "archive": self.archive, "policy": self.policy}
        return {f"{k}.factory": v.factory for k, v in named.items() if v is not None and v.factory}

    def train_config(self, **overrides: Any):  # type: ignore[no-untyped-def]
        """The :class:`~causalcache_lab.selector.train_config.TrainConfig` of this recipe."""
        from causalcache_lab.selector.train_config import TrainConfig

        extra = {k: v for k, v in (self.train.model_extra or {}).items()}
        return TrainConfig(**{**extra, **overrides})

    def ladder_config(self):  # type: ignore[no-untyped-def]
        from causalcache_lab.selector.ladder import LadderConfig

        return LadderConfig(**(self.ladder.model_extra or {}))


def load_recipe(path: str | Path, *, trusted: Iterable[str] = ()) -> Recipe:
    """Parse and validate a recipe YAML (``yaml.safe_load``); ``trusted``: modules the user trusts beside
    the project's own (``--trust-module``). A factory of any other module is refused here."""
    from causalcache_memory.config.loader import read_yaml_file

    raw = read_yaml_file(path) or {}  # bounded; a link out of the recipe's folder is refused unread
    if not isinstance(raw, dict):
        raise ConfigError(f"selector recipe {path} must be a mapping of sections (setup, data, ...)")
    refuse_foreign(raw, Recipe, f"selector recipe {path}")
    if "ladder" in raw and isinstance(raw["ladder"], dict) and "json" in raw["ladder"]:
        raw["ladder"]["json_path"] = raw["ladder"].pop("json")
    try:
        recipe = Recipe.model_validate(raw)
    except ValidationError as exc:
        errors = [f"{'.'.join(show_key(str(p)) for p in e['loc'])}: {e['msg']}" for e in exc.errors()][:20]
        raise ConfigError(f"invalid selector recipe {path}: " + "; ".join(errors), errors) from exc
    trust = lab_trusted_modules(trusted)
    errors = [e for f, v in recipe.factories().items() if (e := factory_error(f, v, trust))]
    if errors:
        raise ConfigError(f"selector recipe {path} names untrusted code: " + "; ".join(errors), errors)
    recipe._trusted = trust
    return recipe


def _call(factory: str, kwargs: Mapping[str, Any], what: str, trusted: tuple[str, ...] = ()) -> Any:
    """Call the factory of ``what`` (a trusted module's callable, ``config.trusted``) with ``kwargs``."""
    return resolve_factory(f"{what}.factory", factory, trusted or lab_trusted_modules())(**dict(kwargs))


@dataclass
class Resolved:
    trajectories: list
    archive: Any
    policy: Any
    #: where the selector's ``text_*`` features read screen text (None: the archive's ``get_text``, if any)
    screen_text: Any = None


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    return obj.get(name) if isinstance(obj, Mapping) else getattr(obj, name, None)


def resolve(recipe: Recipe, *, need_policy: bool = True) -> Resolved:
    """Build the trajectories, archive and policy a recipe names.

    ``need_policy=False`` (``train selector``, which fits a small network on labels already written)
    never calls ``policy.factory``: the labeller is loaded only to label. Every factory is resolved
    (imported, checked against the trusted modules) before any is called.
    """
    trust = recipe._trusted or lab_trusted_modules()
    fns: dict[str, Callable[..., Any]] = {
        f: resolve_factory(f, v, trust)
        for f, v in recipe.factories().items()
        if need_policy or f != "policy.factory"
    }

    def _call(factory: str, kwargs: Mapping[str, Any], what: str) -> Any:
        return fns[f"{what}.factory"](**dict(kwargs))

    base = _call(recipe.setup.factory, recipe.setup.kwargs, "setup") if recipe.setup else None
    trajectories = _get(base, "trajectories")
    if recipe.data.trajectories:
        from causalcache_lab.data.trajectory import load_trajectories

        trajectories = list(load_trajectories(recipe.data.trajectories))
    elif recipe.data.factory:
        trajectories = _call(recipe.data.factory, recipe.data.kwargs, "data")
    archive = _get(base, "archive")
    if recipe.archive.url:
        from causalcache_memory.archive import open_archive

        archive = open_archive(recipe.archive.url)
    elif recipe.archive.factory:
        archive = _call(recipe.archive.factory, recipe.archive.kwargs, "archive")
    if trajectories and recipe.data.successful_only:
        trajectories = [t for t in trajectories if getattr(t, "success", True)]
    policy = _get(base, "policy")
    if recipe.policy is not None and need_policy:  # training never builds the labeller (an 8B VLM...)
        policy = _call(recipe.policy.factory, recipe.policy.kwargs, "policy")
    errors = []
    if not trajectories:
        errors.append("no trajectories: set data.trajectories, data.factory or setup")
    if archive is None:
        errors.append("no archive: set archive.url, archive.factory or setup")
    if need_policy and policy is None:
        errors.append("no policy: set policy.factory or setup")
    if errors:
        raise ConfigError("selector recipe is incomplete: " + "; ".join(errors), errors)
    screen_text = _get(base, "screen_text")
    if screen_text is None:
        screen_text = archive_screen_text(archive)
    return Resolved(list(trajectories), archive, policy, screen_text)


def world_setup(
    tasks: int = 200,
    seed: int = 0,
    archive: str = "runs/selector/archive",
    platform: str = "desktop",
    memory_fraction: float = 0.5,
    policy_seed: int = 0,
    templates: str = "train",
    dev_tasks: int = 0,
    worlds: str | None = None,
    dev_worlds: str = "dev",
) -> dict[str, Any]:
    """Recipe ``setup`` for the synthetic world: expert demonstrations and the simulated policy.

    Generates ``tasks`` tasks from ``seed`` on the world's ``templates`` (``train`` by default: disjoint
    from the ``dev`` and ``eval`` templates), runs the expert (screenshots stored in a local archive at
    ``archive``) and labels with :class:`~causalcache_lab.world.SimulatedPolicy`. With
    ``dev_tasks > 0`` it adds that many tasks of the ``dev`` templates (seed ``seed + 1``); every
    trajectory's ``metadata["data_split"]`` then says ``train`` or ``dev``, for ``train.split_by: metadata``
    (knobs such as the swap threshold are chosen on templates the scorer never trained on).

    ``worlds`` (e.g. ``train`` or ``train-00,train-03``) draws the training tasks from worlds of the
    family instead (:mod:`~causalcache_lab.world.family`) and the dev tasks from ``dev_worlds``;
    held-out worlds are refused for both (:func:`~causalcache_lab.world.splits.require_not_heldout`).
    Each trajectory is labelled by its own world's simulated policy (its vocabulary and recency
    mechanisms: :class:`PerWorldPolicy`). The screens' text is read with the world's exact OCR
    (``screen_text``: :class:`~causalcache_lab.selector.world_text.WorldScreenText`).
    """
    import dataclasses

    from causalcache_lab.world import SimulatedPolicy, generate_demonstrations, generate_tasks
    from causalcache_memory.archive import open_archive

    store = open_archive(archive)
    if worlds is not None:
        return _family_setup(tasks, seed, store, memory_fraction, policy_seed, dev_tasks, worlds, dev_worlds)
    parts = [
        (
            "train",
            generate_tasks(
                tasks, seed, platform=platform, memory_fraction=memory_fraction, templates=templates
            ),
        )
    ]
    if dev_tasks:
        dev = generate_tasks(
            dev_tasks, seed + 1, platform=platform, memory_fraction=memory_fraction, templates="dev"
        )
        parts.append(("dev", dev))
    demos = []
    for name, group in parts:
        for traj in generate_demonstrations(group, store):
            demos.append(dataclasses.replace(traj, metadata={**traj.metadata, "data_split": name}))
    from causalcache_lab.selector.world_text import WorldScreenText

    return {
        "trajectories": demos,
        "archive": store,
        "policy": SimulatedPolicy(seed=policy_seed),
        "screen_text": WorldScreenText(store),
    }


def _family_setup(
    tasks: int,
    seed: int,
    store: Any,
    memory_fraction: float,
    policy_seed: int,
    dev_tasks: int,
    worlds: str,
    dev_worlds: str,
) -> dict[str, Any]:
    import dataclasses

    from causalcache_lab.world import generate_demonstrations
    from causalcache_lab.world.family_tasks import generate_world_tasks, world_of

    parts = [
        (
            "train",
            generate_world_tasks(
                tasks, seed, worlds=worlds, purpose="train", memory_fraction=memory_fraction
            ),
        )
    ]
    if dev_tasks:
        dev = generate_world_tasks(
            dev_tasks, seed + 1, worlds=dev_worlds, purpose="calibrate", memory_fraction=memory_fraction
        )
        parts.append(("dev", dev))
    demos = []
    for name, group in parts:
        world = {t.task_id: world_of(t) for t in group}
        for traj in generate_demonstrations(group, store):
            meta = {**traj.metadata, "data_split": name, "world": world[traj.trajectory_id]}
            demos.append(dataclasses.replace(traj, metadata=meta))
    from causalcache_lab.selector.world_text import WorldScreenText

    return {
        "trajectories": demos,
        "archive": store,
        "policy": PerWorldPolicy(policy_seed),
        "screen_text": WorldScreenText(store),
    }


class PerWorldPolicy:
    """The labeller of trajectories from several worlds: each is scored by its own world's simulated
    policy (:func:`~causalcache_lab.world.family.policy_for_world`), chosen by the trajectory's
    ``metadata["world"]`` through :meth:`for_trajectory` (which the labeller and the ladder call)."""

    name = "simulated-world-policy:per-world"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self._policies: dict[str, Any] = {}

    def for_trajectory(self, trajectory: Any) -> Any:
        from causalcache_lab.world.family import policy_for_world

        world = str(trajectory.metadata.get("world", ""))
        if not world:
            raise ConfigError(
                f"trajectory {trajectory.trajectory_id!r} has no metadata['world']; the per-world labeller "
                "needs it (generate the data with world_setup(worlds=...))"
            )
        if world not in self._policies:
            self._policies[world] = policy_for_world(world, self.seed)
        return self._policies[world]

    def _unrouted(self, *_: Any, **__: Any) -> Any:
        raise ConfigError(
            "PerWorldPolicy scores prompts of several worlds: call for_trajectory(trajectory) to get the "
            "policy of a trajectory's world"
        )

    score = generate = _unrouted
