"""The world's content, drawn from a seed: orders, contacts and threads, code senders, notes, events, web
pages, settings. Every app holds several values of each remembered pattern (the needed one and
distractors); every remembered value is unique within a world."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = ["CODE_SENDERS", "FOLDERS", "PRODUCTS", "SETTING_PAGES", "TOGGLES", "WorldData", "make_world_data"]

PRODUCTS = [
    "Wireless Mouse",
    "Desk Lamp",
    "Coffee Grinder",
    "Yoga Mat",
    "Water Bottle",
    "Phone Case",
    "Running Shoes",
    "Backpack",
    "Headphones",
    "Notebook Set",
    "Tea Kettle",
    "USB Cable",
    "Plant Pot",
    "Wall Clock",
    "Rain Jacket",
    "Sunglasses",
    "Cutting Board",
    "Board Game",
    "Bike Light",
    "Pillow",
]
NAMES = [
    "Alice",
    "Bob",
    "Carol",
    "David",
    "Emma",
    "Frank",
    "Grace",
    "Henry",
    "Irene",
    "Jack",
    "Kate",
    "Liam",
    "Mia",
    "Noah",
    "Olivia",
    "Paul",
]
CHAT_LINES = [
    "Are we still on for lunch?",
    "Thanks for the help!",
    "See you tomorrow",
    "Call me when free",
    "Did you get the tickets?",
    "Running late, sorry",
    "Happy birthday!",
    "Check your email",
]
NOTE_TITLES = ["Groceries", "Trip ideas", "Books to read", "Gift list", "Workout plan", "Recipes"]
PLACE_NOTES = ["Mom", "Office", "Dentist", "Gym", "Storage unit", "Cabin"]
STREETS = ["Oak", "Elm", "Pine", "Maple", "Cedar", "Birch", "Lake", "Hill"]
STREET_KINDS = ["St", "Ave", "Rd"]
EVENTS = ["Team sync", "Dentist", "Yoga class", "Project review", "Lunch with Bob", "Flight", "Haircut"]
DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri"]
PAGES = ["Support", "Billing help", "IT desk", "Returns", "Warranty"]
OTHER_PAGES = ["News", "Weather", "Travel deals", "Recipes"]
FOLDERS = {
    "Downloads": ["report.pdf", "photo-01.jpg", "setup.zip", "invoice.pdf"],
    "Documents": ["resume.docx", "budget.xlsx", "letter.txt"],
    "Photos": ["beach.jpg", "party.png", "cat.jpg"],
    "Music": ["song-a.mp3", "podcast.mp3"],
}
CODE_SENDERS = ["Bank", "Gym", "Post office", "Pharmacy", "Work"]
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
SETTING_PAGES = ["Display", "Account", "Storage", "About"]
TOGGLES = ["Wi-Fi", "Bluetooth", "Dark mode", "Airplane mode"]


@dataclass
class WorldData:
    """The content of one world (seeded). Lists are in display order."""

    orders: list[dict[str, str]]
    contacts: list[str]
    chats: dict[str, list[str]]
    codes: dict[str, list[str]]
    notes: list[dict[str, str]]
    events: list[dict[str, str]]
    pages: dict[str, list[str]]
    tickets: dict[str, str]
    toggles: dict[str, bool] = field(default_factory=dict)


def _unique(rng: random.Random, make: object, used: set[str]) -> str:
    while True:
        value = make()  # type: ignore[operator]
        if value not in used:
            used.add(value)
            return value


def make_world_data(seed: int) -> WorldData:
    """Deterministic content for ``seed``; every remembered value is unique within the world."""
    rng = random.Random(seed)
    used: set[str] = set()
    digits = lambda n: "".join(rng.choice("0123456789") for _ in range(n))  # noqa: E731
    products = rng.sample(PRODUCTS, 5)
    orders = [
        {
            "product": p,
            "number": _unique(rng, lambda: str(rng.randint(1, 9)) + digits(5), used),
            "date": f"{rng.choice(MONTHS)} {rng.randint(1, 28)}",
            "status": rng.choice(["Delivered", "Shipped", "Processing"]),
            "total": f"${rng.randint(5, 120)}.{rng.randint(0, 99):02d}",
        }
        for p in products
    ]
    contacts = rng.sample(NAMES, 6)
    chats = {c: rng.sample(CHAT_LINES, 2) for c in contacts}
    addr = lambda: f"{rng.randint(2, 98)} {rng.choice(STREETS)} {rng.choice(STREET_KINDS)}"  # noqa: E731
    notes = [
        {"title": t, "body": rng.choice(["Milk and eggs", "Ask about prices", "Remember charger"])}
        for t in rng.sample(NOTE_TITLES, 2)
    ]
    notes += [{"title": t, "address": _unique(rng, addr, used)} for t in rng.sample(PLACE_NOTES, 3)]
    rng.shuffle(notes)
    events = [
        {
            "title": t,
            "day": rng.choice(DAYS),
            "time": f"{rng.randint(8, 18)}:{rng.choice(['00', '15', '30', '45'])}",
            "room": _unique(rng, lambda: f"{rng.choice('ABCDEFG')}-{rng.randint(1, 4)}{digits(2)}", used),
        }
        for t in rng.sample(EVENTS, 4)
    ]
    support = rng.sample(PAGES, 3)
    tickets = {p: _unique(rng, lambda: "TK-" + str(rng.randint(1, 9)) + digits(3), used) for p in support}
    pages = {
        p: [f"{p} center", "Your request is open.", "Ticket: " + tickets[p], "Reply within 2 days."]
        for p in support
    }
    for p in rng.sample(OTHER_PAGES, 2):
        pages[p] = [p, "Updated today.", "Read more below."]
    toggles = {k: rng.random() < 0.5 for k in TOGGLES}
    senders = rng.sample(CODE_SENDERS, 3)
    codes = {
        s: [_unique(rng, lambda: str(rng.randint(1, 9)) + digits(5), used) for _ in range(3)] for s in senders
    }
    for note in notes:
        if "address" in note:
            note["contact"] = rng.choice(contacts)
    for event in events:
        event["host"] = rng.choice(contacts)
    return WorldData(orders, contacts, chats, codes, notes, events, pages, tickets, toggles)
