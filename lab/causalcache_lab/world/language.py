"""The goal language of the synthetic world: intent sentences, and the planner that turns them into steps.

A goal is a few sentences that state *what* to do, never *how* (no step list): errands ("Check the
status of your Yoga Mat order."), reads ("Find the room of Dentist."), and one use of what was read
("Send the room to Alice in Messages."). :func:`plan_goal` is the world knowledge both the expert and the
simulated policy share -- which app holds what and how to reach it -- the way a VLM knows that an order
number is under Shop > Orders. It parses each sentence with a fixed grammar and expands it into
:class:`PlanStep` s, tracking each app's screen stack (``open_app`` resumes an app where it was left, so
the plan inserts the ``back`` steps a user would take).

A remembered value is named by another attribute of its item -- the product of an order, the sender of a
code, the title of an event, page or note -- so a screen of the same pattern that belongs to another item
is a distractor, not the answer. :data:`VALUE_KINDS` says how a value of each kind is read off a screen.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from causalcache_memory.errors import ConfigError

__all__ = [
    "ERRANDS",
    "READS",
    "USES",
    "VALUE_KINDS",
    "Need",
    "PlanStep",
    "ValueKind",
    "normalize_sentence",
    "plan_goal",
    "value_phrase",
    "word_sentence",
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
        """A plausible value of this kind (what a policy types when no image shows the value)."""
        if self.phrase == "room":
            return f"{rng.choice('ABCDEFG')}-{rng.randint(100, 499)}"
        if self.phrase == "ticket id":
            return f"TK-{rng.randint(1000, 9999)}"
        if self.phrase == "address":
            return f"{rng.randint(2, 98)} {rng.choice(['Oak', 'Elm', 'Pine', 'Lake'])} {rng.choice(['St', 'Ave'])}"
        if self.phrase in ("host", "contact"):
            return ""  # a person is picked from the screen, not typed
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
    "host": ValueKind("host", re.compile(r"^Host: ([A-Z][a-z]+)$"), ""),
    "contact": ValueKind("contact", re.compile(r"^Contact: ([A-Z][a-z]+)$"), ""),
}
_PHRASE_TO_KIND = {v.phrase: k for k, v in VALUE_KINDS.items()}


@dataclass(frozen=True, slots=True)
class Need:
    """A remembered value: its kind and the attribute that names its item (product, sender, title)."""

    kind: str
    key: str


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One step of a goal's plan.

    Attributes:
        op: ``open_app``, ``click``, ``type``, ``back``, ``home``, ``scroll`` or ``done``.
        app: the app the step is taken in (None on the launcher); for ``open_app`` the app opened.
        label: the label to tap or the field to type into (None for a tap on a remembered label).
        text: literal text to type (None when ``needs`` names remembered values).
        needs: remembered values this step uses (typed, joined by a space, or the label to tap).
        push: whether the tap opens a sub-screen (the planner's stack bookkeeping).
        read: the value this step's screen shows for a ``Find ...`` sentence (the evidence step).
    """

    op: str
    app: str | None = None
    label: str | None = None
    text: str | None = None
    needs: tuple[Need, ...] = ()
    push: bool = False
    read: Need | None = None


# ------------------------------------------------------------------------------------------- grammar
#: kind -> (sentence, app, taps to the screen showing the value); ``{key}`` names the item
READS: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "order": ("Find the order number of your {key} order", "Shop", ("Orders", "{key}")),
    "code": ("Find the latest code {key} sent you", "Messages", ("{key}",)),
    "room": ("Find the room of {key}", "Calendar", ("{key}",)),
    "ticket": ("Find the ticket id on the {key} page", "Browser", ("{key}",)),
    "address": ("Find the address in your {key} note", "Notes", ("{key}",)),
    "host": ("Find who hosts {key}", "Calendar", ("{key}",)),
    "contact": ("Find the contact in your {key} note", "Notes", ("{key}",)),
}
#: errand -> (sentence, app, taps); errands only look at things (several show distractor values)
ERRANDS: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    "order": ("Check the status of your {key} order", "Shop", ("Orders", "{key}")),
    "thread": ("Read your messages from {key}", "Messages", ("{key}",)),
    "event": ("Look up {key} in Calendar", "Calendar", ("{key}",)),
    "page": ("Open the {key} page in Browser", "Browser", ("{key}",)),
    "note": ("Open your {key} note", "Notes", ("{key}",)),
    "folder": ("Browse the {key} folder in Files", "Files", ("{key}",)),
    "shop": ("Look at the {key} in Shop", "Shop", ("{key}",)),
    "settings": ("Look at the {key} page in Settings", "Settings", ("{key}",)),
    "home": ("Go to the home screen", None, ()),
}
#: use -> (sentence with {V} = value phrase, app, steps); step "=F" types into field F, "@" taps the
#: remembered label, "!L" taps L without opening a sub-screen
USES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "messages": ("Send {V} to {contact} in Messages", "Messages", ("{contact}", "=Message", "!Send")),
    "quicknote": ("Add {V} as a quick note in Notes", "Notes", ("=Quick note", "!Add")),
    "newnote": ("Save {V} as a new note in Notes", "Notes", ("New note", "=Note text", "!Save")),
    "settings": (
        "Enter {V} in your account settings",
        "Settings",
        ("Account", "=Verification code", "!Verify"),
    ),
    "browser": ("Search the web for {V}", "Browser", ("=Search", "!Go")),
    "pick": ("Send '{text}' to that person in Messages", "Messages", ("@", "=Message", "!Send")),
    # controls: everything needed is in the goal or on the current screen
    "send": ("Send '{text}' to {contact} in Messages", "Messages", ("{contact}", "=Message", "!Send")),
    "note": ("Save a note saying '{text}' in Notes", "Notes", ("New note", "=Note text", "!Save")),
    "search": ("Search the web for '{text}'", "Browser", ("=Search", "!Go")),
    "toggle": ("Turn {text} {key} in Settings", "Settings", ("!{key}",)),
    "track": (
        "Track your {key} order with its order number in Shop",
        "Shop",
        ("Orders", "{key}", "=Track package", "!Track"),
    ),
}


#: goal wordings of the world family: wording -> (v2 prefix, its prefix); ``polite`` adds "Please ". No v2
#: sentence starts with such a prefix, so :func:`normalize_sentence` leaves v2 goals unchanged
_TERSE = (("Find ", "Get "), ("Send ", "Message "), ("Look at ", "View "))
WORDINGS: dict[str, tuple[tuple[str, str], ...]] = {"plain": (), "terse": _TERSE, "polite": ()}


def word_sentence(sentence: str, wording: str) -> str:
    """``sentence`` (v2's wording) in ``wording`` (``plain``, ``terse`` or ``polite``)."""
    if wording not in WORDINGS:
        raise ConfigError(f"wording={wording!r} must be one of {', '.join(WORDINGS)}")
    if wording == "polite":
        return "Please " + sentence[0].lower() + sentence[1:]
    for plain, worded in WORDINGS[wording]:
        if sentence.startswith(plain):
            return worded + sentence[len(plain) :]
    return sentence


def normalize_sentence(sentence: str) -> str:
    """A sentence of any wording back in v2's wording (the planner's grammar)."""
    if sentence.startswith("Please ") and len(sentence) > 7:
        sentence = sentence[7].upper() + sentence[8:]
    for plain, worded in WORDINGS["terse"]:
        if sentence.startswith(worded):
            return plain + sentence[len(worded) :]
    return sentence


def value_phrase(kinds: tuple[str, ...]) -> str:
    """``the order number`` or ``the order number and the room``."""
    return " and ".join(f"the {VALUE_KINDS[k].phrase}" for k in kinds)


def _compile(sentence: str) -> re.Pattern[str]:
    out = re.escape(sentence)
    for name, rx in (("key", r"(?P<key>.+?)"), ("contact", r"(?P<contact>[A-Z][a-z]+)")):
        out = out.replace(re.escape("{" + name + "}"), rx)
    out = out.replace(re.escape("{V}"), r"(?P<V>the .+?)").replace(re.escape("{text}"), r"(?P<text>[^']+?)")
    return re.compile("^" + out + "$")


_GRAMMAR: list[tuple[str, str, re.Pattern[str]]] = (
    [("read", k, _compile(v[0])) for k, v in READS.items()]
    + [("use", k, _compile(v[0])) for k, v in USES.items()]
    + [("errand", k, _compile(v[0])) for k, v in ERRANDS.items()]
)


class _Planner:
    """Expands parsed sentences into steps, tracking the foreground app and each app's stack depth."""

    def __init__(self) -> None:
        self.steps: list[PlanStep] = []
        self.app: str | None = None
        self.depth: dict[str, int] = {}
        self.reads: dict[str, Need] = {}

    def enter(self, app: str) -> None:
        if self.app != app:
            self.steps.append(PlanStep("open_app", app, app))
            self.app = app
        for _ in range(self.depth.get(app, 0)):
            self.steps.append(PlanStep("back", app))
        self.depth[app] = 0

    def tap(self, label: str | None, *, push: bool = True, needs: tuple[Need, ...] = ()) -> None:
        assert self.app is not None
        self.steps.append(PlanStep("click", self.app, label, needs=needs, push=push))
        if push:
            self.depth[self.app] += 1

    def run(
        self, app: str | None, taps: tuple[str, ...], fields: dict[str, str], needs: tuple[Need, ...]
    ) -> None:
        if app is None:
            self.steps.append(PlanStep("home"))
            self.app = None
            return
        self.enter(app)
        for spec in taps:
            if spec.startswith("="):
                text = fields.get("text")  # a literal from the goal, else the remembered values
                self.steps.append(PlanStep("type", app, spec[1:], text=text, needs=() if text else needs))
            elif spec == "@":
                self.tap(None, push=True, needs=needs)
            elif spec.startswith("!"):
                self.tap(spec[1:].format(**fields), push=False)
            else:
                self.tap(spec.format(**fields))


@lru_cache(maxsize=4096)
def plan_goal(goal: str) -> tuple[PlanStep, ...]:
    """The plan of a goal in the world's language (raises :class:`ConfigError` for anything else)."""
    sentences = [normalize_sentence(s.strip()) for s in goal.strip().rstrip(".").split(". ") if s.strip()]
    if not sentences:
        raise ConfigError(f"goal={goal!r} is empty; goals of the synthetic world are intent sentences")
    planner = _Planner()
    for sentence in sentences:
        for role, name, rx in _GRAMMAR:
            match = rx.match(sentence)
            if match is None:
                continue
            fields = {k: v for k, v in match.groupdict().items() if v is not None}
            if role == "read":
                _, app, taps = READS[name]
                planner.run(app, taps, fields, ())
                need = Need(name, fields["key"])
                last = planner.steps[-1]
                planner.steps[-1] = PlanStep(last.op, last.app, last.label, push=last.push, read=need)
                planner.reads[name] = need
            elif role == "errand":
                _, app, taps = ERRANDS[name]
                planner.run(app, taps, fields, ())
            else:
                _, app, taps = USES[name]
                planner.run(app, taps, fields, _needs(name, fields, planner.reads, sentence))
            break
        else:
            raise ConfigError(f"goal sentence {sentence!r} is not in the synthetic world's language")
    planner.steps.append(PlanStep("done"))
    return tuple(planner.steps)


def _needs(use: str, fields: dict[str, str], reads: dict[str, Need], sentence: str) -> tuple[Need, ...]:
    if use == "pick":
        person = reads.get("host") or reads.get("contact")
        if person is None:
            raise ConfigError(f"goal sentence {sentence!r} refers to 'that person' but none was found before")
        return (person,)
    if use == "track":
        return (Need("order", fields["key"]),)
    if "V" not in fields:
        return ()
    kinds = []
    for part in fields["V"].split(" and "):
        kind = _PHRASE_TO_KIND.get(part.removeprefix("the "))
        if kind is None or kind not in reads:
            raise ConfigError(f"goal sentence {sentence!r} uses {part!r}, which no earlier sentence finds")
        kinds.append(kind)
    return tuple(reads[k] for k in kinds)
