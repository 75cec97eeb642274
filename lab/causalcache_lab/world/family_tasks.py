"""Tasks of the world family: :func:`generate_world_tasks` draws tasks in named worlds.

World ``v2`` is :func:`~causalcache_lab.world.tasks.generate_tasks` unchanged. A family world
(:mod:`~causalcache_lab.world.family`) uses the same grammars and checkers with its knobs: its
split's templates (training worlds ``train``, development ``dev``, held-out ``eval``) restricted to its
app set, its platform, goal wording, errands before and after the read, decoy density, and same-app
*span* controls whose value sits on a screen two or three steps back (:data:`SPAN_TEMPLATES`).
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from causalcache_lab.world.apps import WorldData, make_world_data
from causalcache_lab.world.family import WorldSpec, world_spec
from causalcache_lab.world.language import ERRANDS, READS, USES, plan_goal, word_sentence
from causalcache_lab.world.tasks import (
    _DISTRACTOR_ERRAND,
    ERRANDS_BETWEEN_READS,
    Task,
    _control_task,
    _errand,
    _items,
    _use_of_the_value,
    generate_tasks,
)
from causalcache_lab.world.templates import GRAMMARS, templates_in
from causalcache_memory.errors import ConfigError

__all__ = ["SPAN_TEMPLATES", "generate_world_tasks", "spec_tasks", "template_apps", "world_of"]

# ------------------------------------------------------------------------------------------ world family
#: same-app controls whose value sits on a screen 2-3 steps back (content that spans screens)
SPAN_TEMPLATES = (
    "span:code>messages",
    "span:address>newnote",
    "span:address>quicknote",
    "span:ticket>browser",
)
_TEMPLATES_OF_SPLIT = {
    "train": "train",
    "dev": "dev",
    "devage": "dev",
    "devshift": "dev",
    "devtype": "dev",
    "devmix": "dev",
    "heldout": "eval",
}


def template_apps(template: str) -> set[str]:
    """The apps a template's plan uses (errands aside)."""
    grammar, rest = template.split(":", 1)
    if grammar == "control":
        family = rest.split(":")[0]
        return {USES[family][1]}
    kinds_part, use = rest.split(">")
    return {READS[k][1] for k in kinds_part.split("+")} | {USES[use][1]}


def _family_errand(
    rng: random.Random, data: WorldData, avoid: set[str], spec: WorldSpec, decoy: str | None
) -> str:
    allowed = [e for e, (_, app, _) in ERRANDS.items() if app is None or app in spec.apps]
    name = decoy if decoy is not None and spec.decoys is not None and rng.random() < spec.decoys else None
    return _errand(rng, data, avoid, name or rng.choice(allowed))


def _family_memory_task(
    template: str, data: WorldData, rng: random.Random, spec: WorldSpec
) -> tuple[list[str], dict[str, Any]]:
    grammar, rest = template.split(":", 1)
    kinds_part, use = rest.split(">")
    kinds = kinds_part.split("+")
    needed = {k: rng.choice(list(_items(k, data))) for k in kinds}
    avoid = set(needed.values())
    decoy = _DISTRACTOR_ERRAND[kinds[0]]
    span = grammar == "span"
    sentences = (
        []
        if span
        else [_family_errand(rng, data, avoid, spec, decoy) for _ in range(rng.randint(*spec.before_read))]
    )
    for i, kind in enumerate(kinds):
        if i:
            sentences += [
                _family_errand(rng, data, avoid, spec, decoy)
                for _ in range(rng.randint(*ERRANDS_BETWEEN_READS))
            ]
        sentences.append(READS[kind][0].format(key=needed[kind]))
        if grammar == "inapp":
            same = list(_items(kind, data))
            sentences.append(_errand(rng, data, avoid, _DISTRACTOR_ERRAND[kind], same))
    if not span:
        sentences += [
            _family_errand(rng, data, avoid, spec, decoy) for _ in range(rng.randint(*spec.after_read))
        ]
    sentence, facts = _use_of_the_value(rng, data, use, kinds, needed)
    return [*sentences, sentence], facts


def _family_task(idx: int, spec: WorldSpec, seed: int, template: str, rng: random.Random) -> Task:
    data = make_world_data(seed)
    if template.startswith("control:"):
        sentences, spec_ = _control_task(template, data, rng)
    else:
        sentences, spec_ = _family_memory_task(template, data, rng, spec)
    goal = ". ".join(word_sentence(s, spec.wording) for s in sentences) + "."
    steps = plan_goal(goal)
    need = next((i for i, s in enumerate(steps, 1) if s.needs), None)
    reads = [i for i, s in enumerate(steps, 1) if s.read is not None]
    if template.startswith("control:track"):
        reads = [need - 1] if need else []
    if need is None:
        need = next((i for i, s in enumerate(steps, 1) if s.op == "type"), len(steps) - 1)
    apps = tuple(dict.fromkeys(s.app for s in steps if s.op == "open_app" and s.app))
    return Task(
        f"{spec.world_id}-{idx:04d}-{template}",
        goal,
        spec.platform,
        template,
        seed,
        apps,
        spec_["value"],
        spec_["value_kind"],
        spec_["target"],
        min(reads) if reads else None,
        need,
        spec_["evidence_lines"],
        {"evidence_steps": reads, "world": spec.world_id, "world_split": spec.split},
    )


def spec_tasks(n: int, seed: int, spec: WorldSpec, memory_fraction: float = 0.5) -> list[Task]:
    """``n`` tasks of the family world ``spec`` (not v2), deterministic from ``seed`` and the world id; no
    split check (callers that train or calibrate check the split: :func:`generate_world_tasks`)."""
    which = _TEMPLATES_OF_SPLIT[spec.split]
    pools = {g: [t for t in templates_in(which, g) if template_apps(t) <= set(spec.apps)] for g in GRAMMARS}
    spans = [t for t in SPAN_TEMPLATES if template_apps(t) <= set(spec.apps)]
    memory_grammars = [g for g in GRAMMARS if g != "control" and pools[g]]
    digest = hashlib.sha256(f"{spec.world_id}:{seed}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    tasks: list[Task] = []
    seen: set[str] = set()
    idx = 0
    while len(tasks) < n:
        world_seed = rng.randrange(2**31)
        k = len(tasks)
        memory = int((k + 1) * memory_fraction) > int(k * memory_fraction)
        if memory:
            template = rng.choice(pools[rng.choice(memory_grammars)])
        elif spans and rng.random() < spec.span_controls:
            template = rng.choice(spans)
        else:
            template = rng.choice(pools["control"])
        task = _family_task(idx, spec, world_seed, template, rng)
        idx += 1
        key = f"{task.goal}|{world_seed}"
        if key in seen:
            continue
        seen.add(key)
        tasks.append(task)
    return tasks


def generate_world_tasks(
    n: int,
    seed: int = 0,
    *,
    worlds: str | Sequence[str] = "v2",
    purpose: str = "evaluate",
    memory_fraction: float = 0.5,
    v2_platform: str = "mobile",
    v2_templates: str = "eval",
) -> list[Task]:
    """``n`` tasks spread evenly over ``worlds`` (``train``/``dev``/``heldout``, ``v2`` or world ids),
    world after world, deterministic from ``seed``. ``purpose`` (``train``, ``calibrate`` or ``evaluate``)
    is checked against the splits' rule: held-out worlds are refused for training and calibration.

    World ``v2`` gives exactly :func:`generate_tasks` (``v2_platform``, ``v2_templates``); a family world
    draws from the templates of its split (training worlds: ``train``, development: ``dev``, held-out:
    ``eval``) restricted to its app set, on its platform, with its knobs (:mod:`.family`).
    """
    from causalcache_lab.world.splits import require_not_heldout, resolve_worlds

    ids = resolve_worlds(worlds)
    require_not_heldout(ids, purpose)
    if v2_templates in ("eval", "all") and purpose != "evaluate" and "v2" in ids:
        raise ConfigError(
            f"refusing to {purpose} on v2's evaluation templates (templates={v2_templates!r}); "
            "use templates 'train' or 'dev'"
        )
    if n < len(ids):
        raise ConfigError(
            f"tasks={n} is fewer than the {len(ids)} worlds; ask for at least one task per world"
        )
    out: list[Task] = []
    for i, world_id in enumerate(ids):
        count = n // len(ids) + (i < n % len(ids))
        if world_id == "v2":
            out += generate_tasks(
                count, seed, platform=v2_platform, memory_fraction=memory_fraction, templates=v2_templates
            )
        else:
            out += spec_tasks(count, seed, world_spec(world_id), memory_fraction)
    return out


def world_of(task: Task) -> str:
    """The world id a task was drawn in (``v2`` for tasks of :func:`generate_tasks`)."""
    return str(task.metadata.get("world", "v2"))
