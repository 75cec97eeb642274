"""Tasks of the synthetic world: templated goals, their step plans, splits and success checkers.

A goal is one headline sentence plus ``Steps: clause; clause; ...`` in a small templated language that
both the expert and the simulated policy read with :func:`parse_goal`:

``open <App>`` · ``tap <Label>`` · ``go back`` · ``go home`` · ``scroll down`` ·
``type '<text>' into <Field>`` · ``type the <value> into <Field>`` · ``finish``

``type the <value> into ...`` (value: order number, verification code, room, ticket id, address) names
a value that the goal does not contain: it must be read from a screen.

Two construction-defined splits (decided by task metadata only, :func:`split_of`):

* ``memory_critical``: cross-app. The value is shown on a source-app screen (the *evidence* step), then
  filler navigation in other apps, then it must be typed in a target app (the *need* step). The evidence
  age ``need_step - evidence_step`` is drawn from 2..12: with probability 0.4 uniformly up to 4 (inside a
  Recent-4 window), else uniformly from 5..12 (about a third of the tasks end up inside the window).
* ``control``: one app; what must be typed is in the goal or on the current screen.

Clickable labels and the goal never contain a remembered value, so action summaries cannot leak it.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from causalcache_memory.errors import ConfigError
from causalcache_memory.lab.world.apps import APPS, FOLDERS, SETTING_PAGES, WorldData, make_world_data

__all__ = [
    "VALUE_KINDS",
    "PlanStep",
    "Task",
    "ValueKind",
    "age_histogram",
    "generate_tasks",
    "parse_goal",
    "split_of",
]


@dataclass(frozen=True, slots=True)
class ValueKind:
    """A kind of remembered value.

    Attributes:
        phrase: how goals name it (``the order number``).
        pattern: regex whose group 1 reads the value from an OCR line.
        alphabet: characters a value of this kind is drawn from (the simulator's guessing alphabet).
    """

    phrase: str
    pattern: re.Pattern[str]
    alphabet: str

    def guess(self, rng: random.Random) -> str:
        """A plausible value of this kind."""
        if self.phrase == "room":
            return f"{rng.choice('ABCDEFG')}-{rng.randint(100, 499)}"
        if self.phrase == "ticket id":
            return f"TK-{rng.randint(1000, 9999)}"
        if self.phrase == "address":
            return f"{rng.randint(2, 98)} {rng.choice(['Oak', 'Elm', 'Pine', 'Lake'])} {rng.choice(['St', 'Ave'])}"
        return str(rng.randint(100000, 999999))


_DIGITS = "0123456789"
VALUE_KINDS: dict[str, ValueKind] = {
    "order": ValueKind("order number", re.compile(r"Order #(\d{6})"), _DIGITS),
    "code": ValueKind("verification code", re.compile(r"Your code is (\d{6})"), _DIGITS),
    "room": ValueKind("room", re.compile(r"Room: ([A-G]-\d{3})"), "ABCDEFG-" + _DIGITS),
    "ticket": ValueKind("ticket id", re.compile(r"Ticket: (TK-\d{4})"), "TK-" + _DIGITS),
    "address": ValueKind(
        "address",
        re.compile(r"Address: (\d{1,2} [A-Z][a-z]+ (?:St|Ave|Rd))"),
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ " + _DIGITS,
    ),
}
_PHRASE_TO_KIND = {v.phrase: k for k, v in VALUE_KINDS.items()}


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One step of a goal's plan.

    Attributes:
        op: ``open_app``, ``click``, ``type``, ``back``, ``home``, ``scroll`` or ``done``.
        app: the app the step is taken in (None on the launcher); for ``open_app`` the app opened.
        label: the label to tap, or the field to type into.
        text: literal text to type (None when ``value_kind`` names a remembered value).
        value_kind: key of :data:`VALUE_KINDS` for ``type the <value> into ...``.
    """

    op: str
    app: str | None = None
    label: str | None = None
    text: str | None = None
    value_kind: str | None = None


_CLAUSES = [
    (re.compile(r"^open (\w+)$"), "open_app"),
    (re.compile(r"^tap (.+)$"), "click"),
    (re.compile(r"^go back$"), "back"),
    (re.compile(r"^go home$"), "home"),
    (re.compile(r"^scroll down$"), "scroll"),
    (re.compile(r"^type '([^']+)' into (.+)$"), "type_text"),
    (re.compile(r"^type the (.+?) into (.+)$"), "type_value"),
    (re.compile(r"^finish$"), "done"),
]


@lru_cache(maxsize=4096)
def parse_goal(goal: str) -> tuple[PlanStep, ...]:
    """The plan of a templated goal (``... Steps: clause; clause; ... .``)."""
    if "Steps:" not in goal:
        raise ConfigError(f"goal={goal!r} has no 'Steps:' part; goals of the synthetic world are templated")
    body = goal.split("Steps:", 1)[1].strip().rstrip(".")
    app: str | None = None
    steps: list[PlanStep] = []
    for clause in (c.strip() for c in body.split(";")):
        for pattern, op in _CLAUSES:
            match = pattern.match(clause)
            if match is None:
                continue
            if op == "open_app":
                app = match.group(1)
                steps.append(PlanStep("open_app", app, app))
            elif op == "click":
                steps.append(PlanStep("click", app, match.group(1)))
            elif op == "type_text":
                steps.append(PlanStep("type", app, match.group(2), text=match.group(1)))
            elif op == "type_value":
                kind = _PHRASE_TO_KIND.get(match.group(1))
                if kind is None:
                    raise ConfigError(f"goal clause {clause!r} names an unknown value {match.group(1)!r}")
                steps.append(PlanStep("type", app, match.group(2), value_kind=kind))
            elif op == "home":
                app = None
                steps.append(PlanStep("home"))
            else:
                steps.append(PlanStep(op, app))
            break
        else:
            raise ConfigError(f"goal clause {clause!r} is not in the world's templated language")
    return tuple(steps)


def split_of(apps: tuple[str, ...]) -> str:
    """The split from task metadata alone: more than one app -> ``memory_critical``, else ``control``."""
    return "memory_critical" if len(set(apps)) > 1 else "control"


@dataclass(frozen=True)
class Task:
    """One task.

    Attributes:
        task_id: unique id.
        goal: the instruction, headline plus templated steps.
        platform: ``mobile`` or ``desktop``.
        family: template family, e.g. ``order>messages`` or ``control:send``.
        world_seed: seed of the world content.
        apps: apps the plan uses, in first-use order (the split's metadata).
        value: the text that must end up typed/submitted (remembered value or literal).
        value_kind: key of :data:`VALUE_KINDS` when ``value`` must be read from a screen.
        target: what the checker looks for, e.g. ``{"output": "sent", "contact": "Alice"}``.
        evidence_step: 1-based plan step whose post-action screen shows ``value`` (None if in the goal).
        need_step: 1-based plan step that types ``value``.
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
    metadata: Mapping[str, Any] = field(default_factory=dict)

    @property
    def split(self) -> str:
        return split_of(self.apps)

    @property
    def steps(self) -> tuple[PlanStep, ...]:
        return parse_goal(self.goal)

    @property
    def evidence_age(self) -> int | None:
        """``need_step - evidence_step``: the evidence event's age at the decision that needs it."""
        return None if self.evidence_step is None else self.need_step - self.evidence_step

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
            "metadata": dict(self.metadata),
        }


# ------------------------------------------------------------------------------------------ builders
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

# (source kind) -> (source app, headline fragment builder)
_TARGETS = {
    # name -> (app, base clauses with {V} for the value phrase, base age, output)
    "messages": ("Messages", ["open Messages", "tap {contact}", "type the {V} into Message", "tap Send"], 3),
    "quicknote": ("Notes", ["open Notes", "type the {V} into Quick note", "tap Add"], 2),
    "newnote": ("Notes", ["open Notes", "tap New note", "type the {V} into Note text", "tap Save"], 3),
    "settings": (
        "Settings",
        ["open Settings", "tap Account", "type the {V} into Verification code", "tap Verify"],
        3,
    ),
    "browser": ("Browser", ["open Browser", "type the {V} into Search", "tap Go"], 2),
}
_SOURCE_APP = {
    "order": "Shop",
    "code": "Messages",
    "room": "Calendar",
    "ticket": "Browser",
    "address": "Notes",
}
_ALLOWED = {
    "order": ["messages", "quicknote", "newnote", "browser"],
    "code": ["settings", "quicknote", "newnote"],
    "room": ["messages", "quicknote", "newnote"],
    "ticket": ["messages", "quicknote", "newnote"],
    "address": ["messages", "browser"],
}
_OUTPUT = {
    "messages": "sent",
    "quicknote": "notes",
    "newnote": "notes",
    "settings": "verified",
    "browser": "searched",
}


def _filler_label(app: str, data: WorldData, rng: random.Random) -> str:
    options = {
        "Shop": ["Deals", "Cart"],
        "Messages": data.contacts,
        "Notes": [n["title"] for n in data.notes if "address" not in n],
        "Calendar": ["Today", "Week"],
        "Settings": [p for p in SETTING_PAGES if p != "Account"],
        "Browser": [p for p in data.pages if p not in data.tickets],
        "Files": list(FOLDERS),
    }[app]
    return rng.choice(options)


def _fillers(n: int, avoid: set[str], data: WorldData, rng: random.Random) -> list[str]:
    """``n`` filler clauses in apps outside ``avoid``, each app used at most once."""
    pool = [a for a in APPS if a not in avoid]
    rng.shuffle(pool)
    clauses: list[str] = []
    home_used = False
    while n > 0:
        low = min(3, max(1, n - 3 * (len(pool) - 1)))
        size = rng.randint(low, min(3, n))
        if size == 1 and not home_used and rng.random() < 0.4:
            clauses.append("go home")
            home_used = True
        else:
            app = pool.pop()
            chunk = [f"open {app}"]
            if size >= 2:
                chunk.append(f"tap {_filler_label(app, data, rng)}")
            if size == 3:
                chunk.append("go back")
            clauses += chunk
        n -= size
    return clauses


def _source(kind: str, data: WorldData, rng: random.Random) -> tuple[list[str], str, str]:
    """Clauses reaching the evidence screen, the value, and a headline phrase naming the source."""
    if kind == "order":
        order = rng.choice(data.orders)
        return (
            ["open Shop", "tap Orders", f"tap {order['product']}"],
            order["number"],
            f"the order number of your {order['product']} order",
        )
    if kind == "code":
        return ["open Messages", "tap Bank"], data.bank_codes[-1], "the latest verification code from Bank"
    if kind == "room":
        event = rng.choice(data.events)
        return ["open Calendar", f"tap {event['title']}"], event["room"], f"the room of {event['title']}"
    if kind == "ticket":
        page = rng.choice(list(data.tickets))
        return ["open Browser", f"tap {page}"], data.tickets[page], f"the ticket id on the {page} page"
    note = rng.choice([n for n in data.notes if "address" in n])
    return ["open Notes", f"tap {note['title']}"], note["address"], f"the address in the {note['title']} note"


def _memory_task(idx: int, platform: str, seed: int, rng: random.Random) -> Task:
    data = make_world_data(seed)
    kind = rng.choice(list(_SOURCE_APP))
    target_name = rng.choice(_ALLOWED[kind])
    target_app, base, base_age = _TARGETS[target_name]
    source_clauses, value, phrase = _source(kind, data, rng)
    age = rng.randint(base_age, 4) if rng.random() < 0.4 else rng.randint(5, 12)
    contact = rng.choice(data.contacts)
    fillers = _fillers(age - base_age, {_SOURCE_APP[kind], target_app}, data, rng)
    target_clauses = [c.format(contact=contact, V=VALUE_KINDS[kind].phrase) for c in base]
    clauses = [*source_clauses, *fillers, *target_clauses, "finish"]
    where = {
        "messages": f"send it to {contact} in Messages",
        "quicknote": "add it as a quick note in Notes",
        "newnote": "save it as a new note in Notes",
        "settings": "enter it in Settings > Account",
        "browser": "search for it in Browser",
    }[target_name]
    goal = f"Find {phrase} and {where}. Steps: " + "; ".join(clauses) + "."
    steps = parse_goal(goal)
    evidence = len(source_clauses)
    need = next(i for i, s in enumerate(steps, 1) if s.op == "type")
    target: dict[str, Any] = {"output": _OUTPUT[target_name]}
    if target_name == "messages":
        target["contact"] = contact
    apps = tuple(dict.fromkeys(s.app for s in steps if s.op == "open_app" and s.app))
    return Task(
        f"{platform}-{idx:04d}-{kind}>{target_name}",
        goal,
        platform,
        f"{kind}>{target_name}",
        seed,
        apps,
        value,
        kind,
        target,
        evidence,
        need,
    )


def _control_task(idx: int, platform: str, seed: int, rng: random.Random) -> Task:
    data = make_world_data(seed)
    family = rng.choice(["send", "note", "toggle", "track", "search"])
    k = rng.randint(0, 4)
    value_kind: str | None = None
    evidence: int | None = None
    if family == "send":
        contact, *others = rng.sample(data.contacts, 3)
        value = rng.choice(_LITERALS)
        fill = [c for o in others[: min(k, 2)] for c in (f"tap {o}", "go back")]
        clauses = ["open Messages", *fill, f"tap {contact}", f"type '{value}' into Message", "tap Send"]
        headline, target = f"Send '{value}' to {contact} in Messages.", {"output": "sent", "contact": contact}
    elif family == "note":
        value = rng.choice(_LITERALS)
        titles = [n["title"] for n in data.notes]
        fill = [c for t in rng.sample(titles, min(k, 3)) for c in (f"tap {t}", "go back")]
        clauses = ["open Notes", *fill, "tap New note", f"type '{value}' into Note text", "tap Save"]
        headline, target = f"Save a note saying '{value}' in Notes.", {"output": "notes"}
    elif family == "toggle":
        key = rng.choice(["Wi-Fi", "Bluetooth", "Dark mode", "Airplane mode"])
        on = not data.toggles[key]
        fill = [
            c for p in rng.sample(["Display", "Storage", "About"], min(k, 3)) for c in (f"tap {p}", "go back")
        ]
        clauses = ["open Settings", *fill, f"tap {key}"]
        value = "On" if on else "Off"
        headline, target = (
            f"Turn {value.lower()} {key} in Settings.",
            {"output": "toggle", "key": key, "on": on},
        )
    elif family == "track":
        order, *others = rng.sample(data.orders, 3)
        fill = [c for o in others[: min(k, 2)] for c in (f"tap {o['product']}", "go back")]
        clauses = [
            "open Shop",
            "tap Orders",
            *fill,
            f"tap {order['product']}",
            "type the order number into Track package",
            "tap Track",
        ]
        value, value_kind = order["number"], "order"
        evidence = len(clauses) - 2
        headline = f"Track your {order['product']} order with its order number in Shop."
        target = {"output": "tracked", "number": order["number"]}
    else:
        value = rng.choice(_SEARCHES)
        pages = rng.sample(list(data.pages), min(k, 3))
        fill = [c for p in pages for c in (f"tap {p}", "go back")]
        clauses = ["open Browser", *fill, f"type '{value}' into Search", "tap Go"]
        headline, target = f"Search the web for '{value}' in Browser.", {"output": "searched"}
    goal = headline + " Steps: " + "; ".join([*clauses, "finish"]) + "."
    steps = parse_goal(goal)
    need = next((i for i, s in enumerate(steps, 1) if s.op in ("type",)), len(steps) - 1)
    apps = tuple(dict.fromkeys(s.app for s in steps if s.op == "open_app" and s.app))
    return Task(
        f"{platform}-{idx:04d}-control:{family}",
        goal,
        platform,
        f"control:{family}",
        seed,
        apps,
        value,
        value_kind,
        target,
        evidence,
        need,
    )


def generate_tasks(
    n: int, seed: int = 0, *, platform: str = "mobile", memory_fraction: float = 0.5
) -> list[Task]:
    """``n`` distinct tasks, deterministic from ``seed``.

    Args:
        platform: ``mobile``, ``desktop`` or ``mixed`` (alternating).
        memory_fraction: share of memory-critical tasks (the rest are controls), interleaved.
    """
    if platform not in ("mobile", "desktop", "mixed"):
        raise ConfigError(f"platform={platform!r} must be 'mobile', 'desktop' or 'mixed'")
    if not 0.0 <= memory_fraction <= 1.0:
        raise ConfigError(f"memory_fraction={memory_fraction!r} must be in [0, 1]")
    rng = random.Random(seed)
    tasks: list[Task] = []
    seen: set[str] = set()
    idx = 0
    while len(tasks) < n:
        plat = platform if platform != "mixed" else ("mobile", "desktop")[(idx // 2) % 2]
        world_seed = rng.randrange(2**31)
        memory = int((idx + 1) * memory_fraction) > int(idx * memory_fraction)
        task = (_memory_task if memory else _control_task)(idx, plat, world_seed, rng)
        idx += 1
        if task.goal + plat in seen:
            continue
        seen.add(task.goal + plat)
        tasks.append(task)
    return tasks


def age_histogram(tasks: list[Task]) -> dict[int, int]:
    """Evidence-age counts of the memory-critical tasks."""
    return dict(sorted(Counter(t.evidence_age for t in tasks if t.split == "memory_critical").items()))
