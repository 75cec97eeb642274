"""Tasks of the external-style worlds: a goal in a small step language, its plan, and its checker.

Goal language (sentences joined by ``"; "``), one action per sentence -- the world knowledge a VLM brings,
parsed by :func:`parse_goal` for the simulated policies:

=====================================  ======================================================
sentence                               action
=====================================  ======================================================
``Open <App>``                         ``open_app <App>``
``Select <Label>``                     click the element showing ``<Label>``
``Scroll down``                        ``scroll down`` (long web lists)
``Type "<text>" into <Field>``         type a literal into the form field
``Type the <Attr> of <Item> into <F>`` type the value shown earlier beside ``<Attr>`` on ``<Item>``'s screen
``Press Submit``                       click ``Submit``
``Finish``                             ``done``
=====================================  ======================================================

Splits (each task is one of them):

* ``memory_critical``: ``b`` errands, open the source item (its detail screen is the *evidence*), ``a``
  more errands (each opens another item, often of the same app: decoys of the same kind), then open the
  destination form and type the value. Between the evidence event ``e`` and the typing decision ``N`` lie
  ``2a + 2`` events with ``a >= 2``, so ``N - e > 4``: Recent-4 never holds the evidence
  (``tests/world_ext``), and no later screen shows the value.
* ``control``: the same length and errands, but the value is read right before it is used (``N - e = 3``,
  inside Recent-4: half of the controls) or is a literal of the goal.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from typing import Any

from causalcache_lab.worlds_ext.content import (
    APP_SPECS,
    FORM_FIELDS,
    FORM_OPEN,
    VALUE_KINDS,
    App,
    build_apps,
)

__all__ = ["ExtTask", "Need", "PlanStep", "generate_ext_tasks", "parse_goal"]

_NOTES = ("call back tomorrow", "checked twice", "see attached", "urgent please", "copy to finance")
_TYPE_NEED = re.compile(r"^Type the (.+) of (.+) into (\w+)$")
_TYPE_LIT = re.compile(r'^Type "([^"]*)" into (\w+)$')


@dataclass(frozen=True)
class Need:
    """A value to carry: the ``attr`` field of ``item`` in ``app`` (its ``kind`` decides the form field)."""

    app: str
    item: str
    attr: str
    kind: str


@dataclass(frozen=True)
class PlanStep:
    """One sentence of a goal: ``op`` in ``open_app``, ``click``, ``scroll``, ``type``, ``done``."""

    op: str
    label: str | None = None
    field: str | None = None
    text: str | None = None
    need: Need | None = None


def parse_goal(goal: str) -> list[PlanStep]:
    """The plan of a goal in the step language (module docstring); raises ValueError on other text."""
    steps: list[PlanStep] = []
    for sentence in goal.rstrip(".").split("; "):
        if sentence.startswith("Open "):
            steps.append(PlanStep("open_app", label=sentence[5:]))
        elif sentence.startswith("Select "):
            steps.append(PlanStep("click", label=sentence[7:]))
        elif sentence == "Press Submit":
            steps.append(PlanStep("click", label="Submit"))
        elif sentence == "Scroll down":
            steps.append(PlanStep("scroll"))
        elif sentence == "Finish":
            steps.append(PlanStep("done"))
        elif m := _TYPE_LIT.match(sentence):
            steps.append(PlanStep("type", field=m.group(2), text=m.group(1)))
        elif m := _TYPE_NEED.match(sentence):
            attr, item, fld = m.groups()
            steps.append(PlanStep("type", field=fld, need=Need("", item, attr, "")))
        else:
            raise ValueError(
                f"goal sentence {sentence!r} is not in the step language (parse_goal's docstring)"
            )
    return steps


@dataclass(frozen=True)
class ExtTask:
    """One task of an external-style world.

    Attributes:
        task_id: ``<generator>-<seed>-<index>``.
        generator: ``desktop``, ``web`` or ``mobile``.
        split: ``memory_critical`` or ``control``.
        goal: the goal in the step language.
        apps: the world's apps with this task's values.
        steps: the expert plan (:func:`parse_goal` of ``goal``).
        target: ``(app, field, value)`` the submitted form must hold.
        need: the carried value (None for literal controls).
        evidence_event: planned event whose screen shows the needed value (0 = none).
        use_event: planned decision that types it.
        kind: ``read_late`` / ``read_early`` (memory-critical), ``span`` / ``literal`` (controls).
    """

    task_id: str
    generator: str
    split: str
    goal: str
    apps: tuple[App, ...]
    steps: tuple[PlanStep, ...]
    target: tuple[str, str, str]
    need: Need | None = None
    evidence_event: int = 0
    use_event: int = 0
    kind: str = ""
    metadata: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def needed_value(self) -> str | None:
        return self.target[2] if self.need is not None else None

    def app(self, name: str) -> App:
        return next(a for a in self.apps if a.name == name)

    def check(self, state: dict[str, Any]) -> bool:
        """Success: some submitted form of the target app holds the target value in the target field."""
        app, fld, value = self.target
        return any(a == app and form.get(fld) == value for a, form in state.get("submitted", ()))


def _scrolls(generator: str, app: App, item: str) -> int:
    """``Scroll down`` sentences needed before ``item`` is on screen in ``app``'s list (web only)."""
    if generator != "web":
        return 0
    from causalcache_lab.worlds_ext.web import LIST_ROWS

    return app.listing.index(item) // LIST_ROWS


def _visit(generator: str, app: App, item: str) -> list[str]:
    return [f"Open {app.name}"] + ["Scroll down"] * _scrolls(generator, app, item) + [f"Select {item}"]


def _errand(generator: str, apps: tuple[App, ...], rng: random.Random, src: App, avoid: str) -> list[str]:
    """Open another item: of the source app with probability 1/2 (a decoy of the needed kinds)."""
    app = src if rng.random() < 0.5 else rng.choice(apps)
    names = [i.name for i in app.items if not (app.name == src.name and i.name == avoid)]
    return _visit(generator, app, rng.choice(names))


def _one_task(generator: str, index: int, seed: int, split: str) -> ExtTask:
    rng = random.Random(f"{generator}:{seed}:{index}:{split}")
    apps = build_apps(generator, rng)
    src = rng.choice(apps)
    dst = rng.choice([a for a in apps if a.name != src.name])
    item = rng.choice(src.items)
    spec = next(s for s in APP_SPECS[generator] if s.name == src.name)
    readable = [label for label, kind in spec.fields if kind in VALUE_KINDS]
    attr = rng.choice(readable)
    kind = dict(spec.fields)[attr]
    value = item.value(attr)
    before, after = rng.randint(1, 3), rng.randint(2, 4)
    kinds = ("read_late",) if split == "memory_critical" else ("span", "literal")
    task_kind = rng.choice(kinds)
    sentences: list[str] = []
    for _ in range(before if task_kind == "read_late" else before + after):
        sentences += _errand(generator, apps, rng, src, item.name)
    need = None
    evidence = 0
    if task_kind != "literal":
        sentences += _visit(generator, src, item.name)
        evidence = len(sentences)
        if task_kind == "read_late":
            for _ in range(after):
                sentences += _errand(generator, apps, rng, src, item.name)
        need = Need(src.name, item.name, attr, kind)
    sentences += [f"Open {dst.name}", f"Select {FORM_OPEN}"]
    use = len(sentences) + 1
    if need is not None:
        fld = FORM_FIELDS[kind]
        sentences.append(f"Type the {attr} of {item.name} into {fld}")
        target = (dst.name, fld, value)
    else:
        text = rng.choice(_NOTES)
        sentences.append(f'Type "{text}" into {FORM_FIELDS["text"]}')
        target = (dst.name, FORM_FIELDS["text"], text)
    sentences += ["Press Submit", "Finish"]
    goal = "; ".join(sentences) + "."
    return ExtTask(
        task_id=f"{generator}-{seed}-{index:03d}",
        generator=generator,
        split=split,
        goal=goal,
        apps=apps,
        steps=tuple(parse_goal(goal)),
        target=target,
        need=need,
        evidence_event=evidence,
        use_event=use,
        kind=task_kind,
        metadata={"world": generator, "before": before, "after": after},
    )


def generate_ext_tasks(generator: str, n: int, seed: int) -> list[ExtTask]:
    """``n`` tasks of ``generator`` (half memory-critical, half controls, alternating), deterministic in
    ``(generator, n, seed)``; task ``i`` does not depend on ``n``."""
    if generator not in APP_SPECS:
        raise ValueError(f"generator={generator!r} is unknown; choose one of {', '.join(APP_SPECS)}")
    if n < 1:
        raise ValueError(f"n={n} tasks must be >= 1")
    return [_one_task(generator, i, seed, "memory_critical" if i % 2 == 0 else "control") for i in range(n)]
