"""Tasks of the synthetic world (v2): intent goals, their splits, evidence ground truth and checkers.

A goal is a few intent sentences (:mod:`~causalcache_lab.world.language`); its plan is derived by
:func:`~causalcache_lab.world.language.plan_goal`, never written in the goal. Two
construction-defined splits (decided by task metadata only, :func:`split_of`):

* ``memory_critical``: cross-app. One or two values are found on a source-app screen (the *evidence*
  steps), errands follow (other apps, or the same app with a same-pattern distractor), then the values are
  used in a target app (the *need* step). As many errands (0 to 3, uniformly) come before the read as
  after it, so the evidence sits anywhere in the episode: "restore the oldest steps" and "keep the latest
  steps" are equally (un)informed strategies by construction.
* ``control``: one app; what must be typed is in the goal or on the current screen.

Templates (grammar x app pair) and their fixed train/dev/eval split are in
:mod:`~causalcache_lab.world.templates`; ``generate_tasks(..., templates="eval")`` draws only
from evaluation templates. Clickable labels and goals never contain a remembered value.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from causalcache_lab.world.apps import FOLDERS, WorldData, make_world_data
from causalcache_lab.world.language import (
    ERRANDS,
    READS,
    USES,
    VALUE_KINDS,
    Need,
    PlanStep,
    plan_goal,
    value_phrase,
)
from causalcache_lab.world.templates import GRAMMARS, templates_in
from causalcache_memory.errors import ConfigError

__all__ = ["Task", "age_histogram", "generate_tasks", "split_of"]

#: the screen line that shows a value of each kind (with the item's key also on screen)
VALUE_LINES = {
    "order": "Order #{}",
    "code": "Your code is {}",
    "room": "Room: {}",
    "ticket": "Ticket: {}",
    "address": "Address: {}",
    "host": "Host: {}",
    "contact": "Contact: {}",
}
_LITERALS = [
    "On my way",
    "Call you at noon",
    "Buy more coffee",
    "Pick up the keys",
    "Meet at the cafe",
    "Bring the charger",
    "Running ten minutes late",
    "Lunch at one",
]
_SEARCHES = ["weather today", "train times", "pizza near me", "bike repair", "museum hours"]
_OUTPUT = {
    "messages": "sent",
    "pick": "sent",
    "send": "sent",
    "quicknote": "notes",
    "newnote": "notes",
    "note": "notes",
    "settings": "verified",
    "browser": "searched",
    "search": "searched",
    "track": "tracked",
}


def split_of(apps: tuple[str, ...]) -> str:
    """The split from task metadata alone: more than one app -> ``memory_critical``, else ``control``."""
    return "memory_critical" if len(set(apps)) > 1 else "control"


@dataclass(frozen=True)
class Task:
    """One task.

    Attributes:
        task_id: unique id.
        goal: the instruction (intent sentences, no plan).
        platform: ``mobile`` or ``desktop``.
        family: the task's template (grammar x app pair), e.g. ``inapp:order>messages``.
        world_seed: seed of the world content.
        apps: apps the plan uses, in first-use order (the split's metadata).
        value: the text that must end up typed/submitted (remembered values joined by a space, or literal).
        value_kind: kind of the (first) remembered value, None when nothing must be remembered.
        target: what the checker looks for, e.g. ``{"output": "sent", "contact": "Alice"}``.
        evidence_step: 1-based plan step whose post-action screen first shows the (oldest) needed value.
        need_step: 1-based plan step that uses the remembered values.
        evidence_lines: per needed value, ``(key, line)``: a screen shows that value when it shows both.
    """

    task_id: str
    goal: str
    platform: str
    family: str
    world_seed: int
    apps: tuple[str, ...]
    value: str
    value_kind: str | None
    target: Mapping[str, Any]
    evidence_step: int | None
    need_step: int
    evidence_lines: tuple[tuple[str, str], ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def template(self) -> str:
        return self.family

    @property
    def split(self) -> str:
        return split_of(self.apps)

    @property
    def steps(self) -> tuple[PlanStep, ...]:
        return plan_goal(self.goal)

    @property
    def evidence_age(self) -> int | None:
        """``need_step - evidence_step``: the (oldest) evidence event's age at the decision that needs it."""
        return None if self.evidence_step is None else self.need_step - self.evidence_step

    def evidence_in(self, texts: list[str]) -> tuple[int, ...]:
        """Indices of the needed values that a screen with these ``texts`` shows (ground truth)."""
        return tuple(
            i
            for i, (key, line) in enumerate(self.evidence_lines)
            if any(line in x for x in texts) and any(key in x for x in texts)
        )

    def check(self, state: Any, value: str | None = None) -> bool:
        """Whether the final world ``state`` achieves the goal (``value`` overrides the expected text)."""
        want = self.value if value is None else value
        out = self.target["output"]
        if out == "toggle":
            return state.toggles.get(self.target["key"]) == self.target["on"]
        got = state.outputs.get(out, [])
        if out == "sent":
            return (self.target["contact"], want) in [tuple(x) for x in got]
        if out == "tracked":
            return (self.target["number"], want) in [tuple(x) for x in got]
        return want in got

    def world(self) -> WorldData:
        return make_world_data(self.world_seed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "goal": self.goal,
            "platform": self.platform,
            "family": self.family,
            "split": self.split,
            "world_seed": self.world_seed,
            "apps": list(self.apps),
            "value": self.value,
            "value_kind": self.value_kind,
            "target": dict(self.target),
            "evidence_step": self.evidence_step,
            "need_step": self.need_step,
            "evidence_age": self.evidence_age,
            "evidence_lines": [list(x) for x in self.evidence_lines],
            "metadata": dict(self.metadata),
        }


# ------------------------------------------------------------------------------------------ content
def _items(kind: str, data: WorldData) -> dict[str, str]:
    """Item key -> value of ``kind`` in this world (every item of the kind: the needed one and distractors)."""
    if kind == "order":
        return {o["product"]: o["number"] for o in data.orders}
    if kind == "code":
        return {sender: codes[-1] for sender, codes in data.codes.items()}
    if kind in ("room", "host"):
        return {e["title"]: e["room" if kind == "room" else "host"] for e in data.events}
    if kind == "ticket":
        return dict(data.tickets)
    return {
        n["title"]: n["address" if kind == "address" else "contact"] for n in data.notes if "address" in n
    }


#: kind -> the errand that shows another item of the same kind (a same-pattern distractor)
_DISTRACTOR_ERRAND = {
    "order": "order",
    "code": "thread",
    "room": "event",
    "host": "event",
    "ticket": "page",
    "address": "note",
    "contact": "note",
}


def _errand_keys(errand: str, data: WorldData) -> list[str]:
    return {
        "order": [o["product"] for o in data.orders],
        "thread": [*data.codes, *data.contacts],
        "event": [e["title"] for e in data.events],
        "page": list(data.pages),
        "note": [n["title"] for n in data.notes],
        "folder": list(FOLDERS),
        "shop": ["Deals", "Cart"],
        "settings": ["Display", "Storage", "About"],
        "home": [""],
    }[errand]


def _errand(
    rng: random.Random,
    data: WorldData,
    avoid: set[str],
    name: str | None = None,
    pool: list[str] | None = None,
) -> str:
    """One errand sentence (never about an item in ``avoid``, so needed values are not re-shown)."""
    for _ in range(20):  # a new sentence: no errand is repeated within a task
        kind = name or rng.choice(list(ERRANDS))
        keys = [k for k in (pool or _errand_keys(kind, data)) if k not in avoid or not k]
        sentence = ERRANDS[kind][0].format(key=rng.choice(keys))
        if sentence not in avoid:
            break
    avoid.add(sentence)
    return sentence


#: Episode shape of memory-critical tasks: how many errands (inclusive ranges, drawn uniformly) come before
#: the first read, between the reads of a ``pair`` task, and after the (last) read. Chosen on the dev
#: templates by the rule fixed in ``docs/results/world_shape_rule.md`` (``lab/tools/world_shape_sweep.py``).
ERRANDS_BEFORE_READ: tuple[int, int] = (0, 3)
ERRANDS_BETWEEN_READS: tuple[int, int] = (1, 2)
ERRANDS_AFTER_READ: tuple[int, int] = (0, 3)
#: in-app errands before the action of a ``control:<family>:browse`` task (``plain`` controls have none)
CONTROL_BROWSE_ERRANDS: tuple[int, int] = (1, 2)


def _memory_task(template: str, data: WorldData, rng: random.Random) -> tuple[list[str], dict[str, Any]]:
    grammar, rest = template.split(":", 1)
    kinds_part, use = rest.split(">")
    kinds = kinds_part.split("+")
    needed = {k: rng.choice(list(_items(k, data))) for k in kinds}
    avoid = set(needed.values())
    # as many errands may come before the read as after it (0-3 each), so the evidence sits anywhere in the
    # episode: neither "the oldest steps" nor "the latest steps" hold it by construction
    sentences = [_errand(rng, data, avoid) for _ in range(rng.randint(*ERRANDS_BEFORE_READ))]
    for i, kind in enumerate(kinds):
        if i:  # two distant screens: errands between the reads
            sentences += [_errand(rng, data, avoid) for _ in range(rng.randint(*ERRANDS_BETWEEN_READS))]
        sentences.append(READS[kind][0].format(key=needed[kind]))
        if grammar == "inapp":
            same = list(_items(kind, data))  # another item of the same kind: a same-pattern distractor
            sentences.append(_errand(rng, data, avoid, _DISTRACTOR_ERRAND[kind], same))
    sentences += [_errand(rng, data, avoid) for _ in range(rng.randint(*ERRANDS_AFTER_READ))]
    sentence, facts = _use_of_the_value(rng, data, use, kinds, needed)
    return [*sentences, sentence], facts


def _control_task(template: str, data: WorldData, rng: random.Random) -> tuple[list[str], dict[str, Any]]:
    _, family, variant = template.split(":")
    browse = {"send": "thread", "note": "note", "toggle": "settings", "track": "order", "search": "page"}
    main: dict[str, Any] = {}
    if family == "send":
        main["contact"] = rng.choice(data.contacts)
        main["text"] = rng.choice(_LITERALS)
    elif family == "note":
        main["text"] = rng.choice(_LITERALS)
    elif family == "search":
        main["text"] = rng.choice(_SEARCHES)
    elif family == "toggle":
        main["key"] = rng.choice(sorted(data.toggles))
        main["text"] = "off" if data.toggles[main["key"]] else "on"
    else:
        main["key"] = rng.choice([o["product"] for o in data.orders])
    avoid = {main.get("key", ""), main.get("contact", "")}
    n_browse = rng.randint(*CONTROL_BROWSE_ERRANDS) if variant == "browse" else 0
    sentences = [_errand(rng, data, avoid, browse[family]) for _ in range(n_browse)]
    sentences.append(USES[family][0].format(**main))
    target: dict[str, Any] = {"output": _OUTPUT.get(family, "toggle")}
    value, kind, lines = main.get("text", ""), None, ()
    if family == "send":
        target["contact"] = main["contact"]
    elif family == "toggle":
        target.update(key=main["key"], on=main["text"] == "on")
        value = main["text"].capitalize()
    elif family == "track":
        value = {o["product"]: o["number"] for o in data.orders}[main["key"]]
        target["number"], kind = value, "order"
        lines = ((main["key"], VALUE_LINES["order"].format(value)),)
    return sentences, {"value": value, "value_kind": kind, "target": target, "evidence_lines": lines}


def _build(idx: int, platform: str, seed: int, template: str, rng: random.Random) -> Task:
    data = make_world_data(seed)
    make = _control_task if template.startswith("control:") else _memory_task
    sentences, spec = make(template, data, rng)
    goal = ". ".join(sentences) + "."
    steps = plan_goal(goal)
    need = next((i for i, s in enumerate(steps, 1) if s.needs), None)
    reads = [i for i, s in enumerate(steps, 1) if s.read is not None]
    if template.startswith("control:track"):
        reads = [need - 1] if need else []
    if need is None:  # controls without a remembered value: the step that types or toggles
        need = next((i for i, s in enumerate(steps, 1) if s.op == "type"), len(steps) - 1)
    apps = tuple(dict.fromkeys(s.app for s in steps if s.op == "open_app" and s.app))
    return Task(
        f"{platform}-{idx:04d}-{template}",
        goal,
        platform,
        template,
        seed,
        apps,
        spec["value"],
        spec["value_kind"],
        spec["target"],
        min(reads) if reads else None,
        need,
        spec["evidence_lines"],
        {"evidence_steps": reads, "world": "v2"},
    )


def generate_tasks(
    n: int,
    seed: int = 0,
    *,
    platform: str = "mobile",
    memory_fraction: float = 0.5,
    templates: str = "all",
) -> list[Task]:
    """``n`` distinct tasks, deterministic from ``seed``.

    Args:
        platform: ``mobile``, ``desktop`` or ``mixed`` (alternating in pairs).
        memory_fraction: share of memory-critical tasks (the rest are controls), interleaved.
        templates: ``train``, ``dev``, ``eval`` or ``all`` -- which templates to draw from
            (:mod:`~causalcache_lab.world.templates`). A grammar is drawn uniformly, then a
            template of that grammar.
    """
    if platform not in ("mobile", "desktop", "mixed"):
        raise ConfigError(f"platform={platform!r} must be 'mobile', 'desktop' or 'mixed'")
    if not 0.0 <= memory_fraction <= 1.0:
        raise ConfigError(f"memory_fraction={memory_fraction!r} must be in [0, 1]")
    pools = {g: templates_in(templates, g) for g in GRAMMARS}
    memory_grammars = [g for g in GRAMMARS if g != "control" and pools[g]]
    rng = random.Random(seed)
    tasks: list[Task] = []
    seen: set[str] = set()
    idx = 0
    while len(tasks) < n:
        plat = platform if platform != "mixed" else ("mobile", "desktop")[(idx // 2) % 2]
        world_seed = rng.randrange(2**31)
        k = len(tasks)  # interleave by accepted tasks, so skipped duplicates do not skew the splits
        memory = int((k + 1) * memory_fraction) > int(k * memory_fraction)
        grammar = rng.choice(memory_grammars) if memory else "control"
        task = _build(idx, plat, world_seed, rng.choice(pools[grammar]), rng)
        idx += 1
        key = f"{task.goal}|{plat}|{world_seed}"  # one goal in another world is another task (other values)
        if key in seen:
            continue
        seen.add(key)
        tasks.append(task)
    return tasks


def age_histogram(tasks: list[Task]) -> dict[int, int]:
    """Evidence-age counts of the memory-critical tasks."""
    return dict(sorted(Counter(t.evidence_age for t in tasks if t.split == "memory_critical").items()))


def needs_of(task: Task) -> tuple[Need, ...]:
    """The remembered values the task's need step uses."""
    return task.steps[task.need_step - 1].needs


__all__ += ["VALUE_KINDS", "VALUE_LINES", "needs_of"]


def _use_of_the_value(
    rng: random.Random, data: WorldData, use: str, kinds: Sequence[str], needed: dict[str, int]
) -> tuple[str, dict[str, Any]]:
    """The goal's closing sentence (what the read value is used for) and the task's target facts."""
    contact, text = rng.choice(data.contacts), rng.choice(_LITERALS)  # in this order (reproducible)
    sentence = USES[use][0].format(V=value_phrase(tuple(kinds)), contact=contact, text=text)
    values = [_items(k, data)[needed[k]] for k in kinds]
    value = text if use == "pick" else " ".join(values)
    target: dict[str, Any] = {"output": _OUTPUT[use]}
    if use in ("pick", "messages"):  # pick: the value names the contact; messages: the goal does
        target["contact"] = values[0] if use == "pick" else contact
    lines = tuple((needed[k], VALUE_LINES[k].format(v)) for k, v in zip(kinds, values, strict=True))
    return sentence, {"value": value, "value_kind": kinds[0], "target": target, "evidence_lines": lines}
