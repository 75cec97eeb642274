"""Content of the external-style worlds: apps, their items and fields, and value kinds.

None of it is shared with the world family (``lab/world/content.py``): other app names, other item and
person lists, other value formats. An :class:`App` holds :class:`Item` s; an item's detail screen shows
its fields ``(label, value)``; every app has a form (``New entry``) with the fields of
:data:`FORM_FIELDS`. Values of the *needed* kinds (:data:`VALUE_KINDS`) are the ones tasks carry from
one screen to another.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

__all__ = [
    "APP_SPECS",
    "FORM_FIELDS",
    "FORM_OPEN",
    "VALUE_KINDS",
    "App",
    "AppSpec",
    "Item",
    "build_apps",
    "make_value",
]

#: the needed value kinds and the form field each is typed into
VALUE_KINDS = ("money", "ticket", "ref")
FORM_FIELDS = {"money": "Amount", "ticket": "Ticket", "ref": "Reference", "text": "Note"}
#: the button that opens an app's form
FORM_OPEN = "New entry"

_LETTERS = "ABCDEFGHJKLMNPQRSTUVWXYZ"
_PEOPLE = (
    "Dana Whitlock", "Omar Reyes", "Ines Vogel", "Tariq Bello", "Mira Kowal", "Lena Ostrova",
    "Jon Pike", "Priya Nandan", "Hugo Brandt", "Sade Okafor", "Yuki Tanabe", "Rafael Dias",
)  # fmt: skip
_STATUS = ("Open", "Pending", "Closed", "On hold", "Escalated", "Resolved")


def make_value(kind: str, rng: random.Random) -> str:
    """A random value of ``kind``: ``money`` ``$1,234.56``, ``ticket`` ``INC-48213``, ``ref`` ``K7Q-2291``,
    ``date`` ``2026-03-14``, ``size`` ``12.4 MB``, ``status``, ``person``, ``count`` ``17``."""
    if kind == "money":
        return f"${rng.randint(10, 98_000):,}.{rng.randint(0, 99):02d}"
    if kind == "ticket":
        return f"INC-{rng.randint(10_000, 99_999)}"
    if kind == "ref":
        return f"{rng.choice(_LETTERS)}{rng.randint(2, 9)}{rng.choice(_LETTERS)}-{rng.randint(1000, 9999)}"
    if kind == "date":
        return f"2026-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}"
    if kind == "size":
        return f"{rng.randint(1, 990)}.{rng.randint(0, 9)} MB"
    if kind == "status":
        return rng.choice(_STATUS)
    if kind == "person":
        return rng.choice(_PEOPLE)
    if kind == "count":
        return str(rng.randint(1, 60))
    raise ValueError(f"kind={kind!r} is not a value kind; choose money, ticket, ref, date, size, status, ...")


@dataclass(frozen=True)
class AppSpec:
    """How an app's items look.

    Attributes:
        name: the app (or site) name.
        items: names of its items (accounts, threads, files, orders ...).
        fields: ``(label, kind)`` of every item's fields (the needed kinds among them are readable).
        summary: kind of the one value a list row shows beside the item name (never a needed kind).
        fillers: ``(low, high)`` extra ``(label, value)`` rows of non-needed kinds per item (density).
        grid: the detail screen is a dense grid (a spreadsheet) rather than a property list.
        archive: ``(low, high)`` archived entries among the items of the app's list (long lists), or None.
        two_row: the detail screen shows each label on one row and its value on the next (web ``<dl>``).
    """

    name: str
    items: tuple[str, ...]
    fields: tuple[tuple[str, str], ...]
    summary: str = "date"
    fillers: tuple[int, int] = (0, 4)
    grid: bool = False
    archive: tuple[int, int] | None = None
    two_row: bool = False


@dataclass(frozen=True)
class Item:
    """One item: its name, the list row's summary and its fields (label, value) in display order."""

    name: str
    summary: str
    fields: tuple[tuple[str, str], ...]

    def value(self, label: str) -> str:
        return next(v for k, v in self.fields if k == label)


@dataclass(frozen=True)
class App:
    """One app of a task's world."""

    name: str
    items: tuple[Item, ...]
    grid: bool = False
    #: the rows of the app's list, in order (item names, and on long web lists archived entries too)
    listing: tuple[str, ...] = ()

    def item(self, name: str) -> Item | None:
        return next((i for i in self.items if i.name == name), None)


_FILLER_LABELS = (
    "Owner",
    "Created",
    "Updated",
    "Priority",
    "Region",
    "Tag",
    "Team",
    "Size",
    "Count",
    "State",
)
_FILLER_KIND = {"Owner": "person", "Created": "date", "Updated": "date", "Priority": "count", "Region": "status",
                "Tag": "status", "Team": "person", "Size": "size", "Count": "count", "State": "status"}  # fmt: skip

_ACCOUNTS = ("Ruby Savings", "Oak Checking", "Harbor Joint", "Cedar Travel", "Maple Bills", "Quartz Reserve",
             "Birch Payroll", "Slate Holiday")  # fmt: skip
_ISSUES = ("VPN drops hourly", "Printer jams on 3F", "Laptop fan noise", "Badge reader down", "Mailbox full",
           "Monitor flicker", "Wiki login loop", "Slow file share")  # fmt: skip
_SHEETS = ("Budget 2026", "Vendor costs", "Travel plan", "Hiring forecast", "Lab supplies", "Cloud spend")
_FILES = ("quarterly_review", "site_survey", "contract_draft", "onboarding_pack", "floor_plan", "audit_notes",
          "press_kit", "supplier_list")  # fmt: skip
_ORDERS = ("Walnut desk", "Copper kettle", "Linen curtains", "Trail backpack", "Ceramic vase", "Wool blanket",
           "Desk fan", "Hiking poles")  # fmt: skip
_FLIGHTS = ("Lisbon to Oslo", "Quito to Lima", "Perth to Cairns", "Porto to Riga", "Accra to Dakar",
            "Kyoto to Sapporo")  # fmt: skip
_PLACES = ("Harbor Clinic", "North Pharmacy", "Elm Street Lab", "Lakeside Gym", "Pine Dental", "Bay Vet")
_PARCELS = ("Blue sneakers", "Phone case", "Paper lamp", "Tea sampler", "Bike light", "Yoga mat")

#: the apps of each generator (5 each; names and fields differ between generators)
APP_SPECS: dict[str, tuple[AppSpec, ...]] = {
    "desktop": (
        AppSpec("Tickets", _ISSUES, (("Ticket", "ticket"), ("Related", "ticket"), ("Status", "status"),
                                     ("Assignee", "person")), "status", (2, 8)),
        AppSpec("Bank", _ACCOUNTS, (("Balance", "money"), ("Available", "money"), ("Routing", "ref"),
                                    ("Opened", "date")), "status", (1, 5)),
        AppSpec("Sheet", _SHEETS, tuple((f"{m} {q}", "money") for m in ("Cost", "Budget", "Forecast")
                                        for q in ("Q1", "Q2", "Q3", "Q4")), "date", (60, 100), grid=True),
        AppSpec("Chat", _PEOPLE[:8], (("Code", "ref"), ("Refund", "money"), ("Case", "ticket")), "date", (6, 20)),
        AppSpec("Files", _FILES, (("Checksum", "ref"), ("Invoice", "money"), ("Owner", "person")), "size", (3, 10)),
    ),
    "web": (
        AppSpec("Shop", _ORDERS, (("Order total", "money"), ("Refund", "money"), ("Tracking", "ref")), "date", (4, 12),
                archive=(30, 150), two_row=True),
        AppSpec("Airline", _FLIGHTS, (("Booking", "ref"), ("Fare", "money"), ("Voucher", "ref")), "date", (4, 12),
                archive=(10, 60)),
        AppSpec("Helpdesk", _ISSUES, (("Case", "ticket"), ("Parent", "ticket"), ("Status", "status")), "status",
                (6, 18), archive=(20, 120), two_row=True),
        AppSpec("Payroll", _PEOPLE[:8], (("Net pay", "money"), ("Bonus", "money"), ("Employee ID", "ref")), "date",
                (4, 12)),
        AppSpec("Wiki", _SHEETS, (("Page ID", "ref"), ("Cost", "money"), ("Owner", "person")), "date", (20, 45)),
    ),
    "mobile": (
        AppSpec("Wallet", _ACCOUNTS[:6], (("Balance", "money"), ("Pending", "money"), ("Card", "ref")), "status",
                (0, 2)),
        AppSpec("Rides", _PLACES, (("Fare", "money"), ("Trip", "ref")), "date", (0, 2)),
        AppSpec("Messages", _PEOPLE[:6], (("Code", "ref"), ("Case", "ticket")), "date", (0, 3)),
        AppSpec("Health", _PLACES, (("Visit", "ticket"), ("Copay", "money")), "date", (0, 2)),
        AppSpec("Parcel", _PARCELS, (("Tracking", "ref"), ("Cost", "money")), "date", (0, 2)),
    ),
    # sealed (docs/sealed/generators-v1.yaml): text-mode apps
    "terminal": (
        AppSpec("Ledger", ("cash-eur", "cash-usd", "petty", "escrow", "payroll-q3", "grants"),
                (("Balance", "money"), ("Hold", "money"), ("IBAN ref", "ref")), "status", (1, 6)),
        AppSpec("Mail", ("ops-alerts", "vendor-acme", "hr-notices", "travel-desk", "legal-review", "it-support"),
                (("Code", "ref"), ("Invoice", "money"), ("Case", "ticket")), "date", (2, 8)),
        AppSpec("Issues", ("disk-full-db3", "cron-skew", "cert-expiry", "dns-flap", "oom-worker", "ntp-drift"),
                (("Issue", "ticket"), ("Blocks", "ticket"), ("Owner", "person")), "status", (2, 8)),
        AppSpec("Parts", ("hex-bolt-m8", "relay-24v", "fan-120mm", "psu-650w", "ssd-1tb", "cable-cat6"),
                (("SKU", "ref"), ("Price", "money"), ("Stock", "count")), "count", (1, 6)),
        AppSpec("Jobs", ("nightly-build", "backup-s3", "etl-orders", "lint-all", "deploy-edge", "reindex"),
                (("Run", "ref"), ("Cost", "money")), "status", (2, 10)),
    ),
}  # fmt: skip


def build_apps(generator: str, rng: random.Random) -> tuple[App, ...]:
    """The apps of one task's world on ``generator``: every item gets fresh values, its fields in a random
    order, and ``fillers`` extra rows of non-needed kinds."""
    if generator not in APP_SPECS:
        raise ValueError(f"generator={generator!r} is unknown; choose one of {', '.join(APP_SPECS)}")
    apps = []
    for spec in APP_SPECS[generator]:
        items = []
        for name in spec.items:
            fields = [(label, make_value(kind, rng)) for label, kind in spec.fields]
            n_fill = rng.randint(*spec.fillers)
            for k in range(n_fill):
                label = _FILLER_LABELS[k % len(_FILLER_LABELS)]
                suffix = f" {k // len(_FILLER_LABELS) + 1}" if k >= len(_FILLER_LABELS) else ""
                fields.append((label + suffix, make_value(_FILLER_KIND[label], rng)))
            rng.shuffle(fields)
            items.append(Item(name, make_value(spec.summary, rng), tuple(fields)))
        listing = [i.name for i in items]
        if spec.archive:  # a long list: the items sit among archived entries (web pages scroll)
            n_archived = rng.randint(*spec.archive)
            listing += [
                f"Archived {spec.name.lower()} {rng.randint(10_000, 99_999)}" for _ in range(n_archived)
            ]
            rng.shuffle(listing)
        apps.append(App(spec.name, tuple(items), spec.grid, tuple(listing)))
    return tuple(apps)
