"""The world's content (seeded) and the screens of its apps.

:class:`WorldData` is everything an episode's apps show: orders, contacts and threads, notes, calendar
events, settings, web pages and files, drawn deterministically from a seed. :func:`build_screen` turns
the navigation state into a :class:`~causalcache_memory.lab.world.render.Screen` whose clickable elements
carry *actions* the environment interprets:

* ``("app", name)`` opens an app; ``("push", screen, arg)`` opens a sub-screen;
* ``("toggle", key)`` flips a setting; ``("focus", field_id)`` focuses a text field;
* ``("submit", form, field_id)`` submits the field's text (send a message, save a note, ...).

Values that tasks ask the agent to carry across apps (order numbers, verification codes, rooms, ticket
ids, addresses, event hosts) only ever appear as screen text, never as a clickable label. Every app holds
several values of each pattern (five orders, several code senders with three codes each, four events
with a room and a host, three place notes), so most screens a task visits show *distractors*: values of
the needed pattern that belong to another item.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from causalcache_memory.lab.world.render import (
    ACCENTS,
    BUBBLE_IN,
    BUBBLE_OUT,
    HEADING,
    HOME_ACCENT,
    WHITE,
    Layout,
    Screen,
)

__all__ = ["APPS", "CODE_SENDERS", "WorldData", "build_screen", "make_world_data"]

#: app name -> accent colour
APPS: dict[str, tuple[int, int, int]] = ACCENTS

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


@dataclass
class NavState:
    """Where the user is: the foreground app (None = launcher) and each app's screen stack."""

    app: str | None = None
    stacks: dict[str, list[tuple[str, str]]] = field(default_factory=dict)
    fields: dict[str, str] = field(default_factory=dict)
    scroll: dict[str, int] = field(default_factory=dict)

    def top(self) -> tuple[str, str]:
        assert self.app is not None
        return self.stacks.setdefault(self.app, [("root", "")])[-1]


def build_screen(data: WorldData, nav: NavState, size: tuple[int, int], outputs: dict[str, list]) -> Screen:
    """The screen currently shown for ``nav``."""
    if nav.app is None:
        return _home(size)
    screen, arg = nav.top()
    builder = _BUILDERS[(nav.app, screen)]
    if arg:
        title = "" if arg.isdigit() else arg
    else:
        title = "" if screen == "root" else screen.capitalize()
    lay = Layout(size, nav.app, title, accent=APPS[nav.app])
    builder(lay, data, nav, arg, outputs)
    return lay.screen


def _home(size: tuple[int, int]) -> Screen:
    from causalcache_memory.lab.world.render import Element

    lay = Layout(size, None, "", accent=HOME_ACCENT)
    per_row = max(1, (lay.c1 - lay.c0 + 2) // 11)
    for i, (app, colour) in enumerate(APPS.items()):
        col = lay.c0 + (i % per_row) * 11
        row = lay.row + (i // per_row) * 7
        lay.add(Element("icon", app[0], (col + 1, row, col + 6, row + 3), colour, WHITE, action=("app", app)))
        lay.add(Element("text", app, (col, row + 4, col + len(app), row + 5), None, action=("app", app)))
    return lay.screen


def _list_window(nav: NavState, key: str, items: list, visible: int) -> list:
    offset = nav.scroll.get(key, 0)
    return items[offset : offset + visible]


# ---------------------------------------------------------------- Shop
def _shop_root(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.buttons(
        [("Orders", ("push", "orders", "")), ("Cart", ("push", "cart", "")), ("Deals", ("push", "deals", ""))]
    )
    lay.text("Featured", fg=HEADING)
    for product in PRODUCTS[:4]:
        lay.text(f"  {product}  ${len(product) * 3}.99")


def _shop_orders(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.text("Your recent orders")
    lay.gap()
    for i, order in enumerate(data.orders):
        lay.item(order["product"], ("push", "order", str(i)), detail=order["date"])


def _shop_order(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    order = data.orders[int(arg)]
    lay.screen.title = order["product"]
    lay.text(order["product"])
    lay.text("Order #" + order["number"])
    lay.text("Placed: " + order["date"])
    lay.text("Status: " + order["status"])
    lay.text("Total: " + order["total"])
    lay.gap()
    fid = f"track:{arg}"
    lay.field("Track package", nav.fields.get(fid, ""), fid)
    lay.button("Track", ("submit", "track", fid))


def _shop_simple(lines: list[str]):
    def build(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
        for line in lines:
            lay.text(line)

    return build


# ---------------------------------------------------------------- Messages
def _msg_root(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    threads = [*data.codes, *data.contacts]
    for name in _list_window(nav, "Messages", threads, 12):
        lay.item(name, ("push", "thread", name), detail="New" if name in data.codes else "Read")


def _msg_thread(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    if arg in data.codes:
        for i, code in enumerate(data.codes[arg]):
            lay.text(f"Day {i + 1}: Your code is {code}", bg=BUBBLE_IN)
            lay.gap()
    else:
        for line in data.chats.get(arg, []):
            lay.text(line, bg=BUBBLE_IN)
            lay.gap()
    for contact, text in out.get("sent", []):
        if contact == arg:
            lay.text("Me: " + text, bg=BUBBLE_OUT)
            lay.gap()
    fid = f"msg:{arg}"
    lay.field("Message", nav.fields.get(fid, ""), fid)
    lay.button("Send", ("submit", "send", fid))


# ---------------------------------------------------------------- Notes
def _notes_root(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.field("Quick note", nav.fields.get("quick", ""), "quick")
    lay.buttons([("Add", ("submit", "note", "quick")), ("New note", ("push", "new", ""))])
    for i, note in enumerate(data.notes):
        lay.item(note["title"], ("push", "note", str(i)))
    for text in out.get("notes", [])[-2:]:
        lay.text("Saved: " + text[:30])


def _notes_note(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    note = data.notes[int(arg)]
    lay.screen.title = note["title"]
    lay.text(note["title"])
    if "address" in note:
        lay.text("Address: " + note["address"])
        lay.text("Contact: " + note["contact"])
        lay.text("Ring the bell twice.")
    else:
        lay.text(note["body"])


def _notes_new(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.field("Note text", nav.fields.get("new", ""), "new")
    lay.button("Save", ("submit", "note", "new"))


# ---------------------------------------------------------------- Calendar
def _cal_root(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.buttons([("Today", ("push", "today", "")), ("Week", ("push", "week", ""))])
    for i, event in enumerate(data.events):
        lay.item(event["title"], ("push", "event", str(i)), detail=event["day"])


def _cal_event(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    event = data.events[int(arg)]
    lay.screen.title = event["title"]
    lay.text(event["title"])
    lay.gap()
    lay.text(f"Time: {event['day']} {event['time']}")
    lay.text("Room: " + event["room"])
    lay.text("Host: " + event["host"])
    lay.text("Reminder: 15 min before")


# ---------------------------------------------------------------- Settings
def _settings_root(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    for key in TOGGLES:
        lay.toggle(key, data.toggles[key], ("toggle", key))
    for page in SETTING_PAGES:
        lay.item(page, ("push", page.lower(), ""))


def _settings_account(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.text("Signed in as user@mail.com")
    lay.text("Enter the code we sent you.")
    lay.gap()
    lay.field("Verification code", nav.fields.get("code", ""), "code")
    lay.button("Verify", ("submit", "verify", "code"))
    if out.get("verified"):
        lay.text("Code submitted.")


# ---------------------------------------------------------------- Browser
def _browser_root(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.field("Search", nav.fields.get("search", ""), "search")
    lay.button("Go", ("submit", "search", "search"))
    lay.text("Bookmarks", fg=HEADING)
    for page in data.pages:
        lay.item(page, ("push", "page", page))


def _browser_page(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    for line in data.pages[arg]:
        lay.text(line)
        lay.gap()


# ---------------------------------------------------------------- Files
def _files_root(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    for folder, files in FOLDERS.items():
        lay.item(folder, ("push", "folder", folder), detail=f"{len(files)} files")


def _files_folder(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    for i, name in enumerate(FOLDERS[arg]):
        lay.item(name, ("push", "file", name), detail=f"{(i + 2) * 37} KB")


def _files_file(lay: Layout, data: WorldData, nav: NavState, arg: str, out: dict) -> None:
    lay.text("Name: " + arg)
    lay.text("Modified: Oct 3")


_BUILDERS = {
    ("Shop", "root"): _shop_root,
    ("Shop", "orders"): _shop_orders,
    ("Shop", "order"): _shop_order,
    ("Shop", "cart"): _shop_simple(["Your cart is empty.", "Browse deals to add items."]),
    ("Shop", "deals"): _shop_simple(["Up to 30% off lamps", "Free shipping over $50", "New: garden tools"]),
    ("Messages", "root"): _msg_root,
    ("Messages", "thread"): _msg_thread,
    ("Notes", "root"): _notes_root,
    ("Notes", "note"): _notes_note,
    ("Notes", "new"): _notes_new,
    ("Calendar", "root"): _cal_root,
    ("Calendar", "event"): _cal_event,
    ("Calendar", "today"): _shop_simple(["No more events today."]),
    ("Calendar", "week"): _shop_simple(["4 events this week", "Busiest day: Wed"]),
    ("Settings", "root"): _settings_root,
    ("Settings", "account"): _settings_account,
    ("Settings", "display"): _shop_simple(["Brightness: 70%", "Text size: Medium"]),
    ("Settings", "storage"): _shop_simple(["Used: 41.2 GB of 128 GB", "Apps: 12.5 GB"]),
    ("Settings", "about"): _shop_simple(["Model: Demo Phone", "Version: 14.2"]),
    ("Browser", "root"): _browser_root,
    ("Browser", "page"): _browser_page,
    ("Files", "root"): _files_root,
    ("Files", "folder"): _files_folder,
    ("Files", "file"): _files_file,
}
