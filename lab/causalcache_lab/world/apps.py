"""The world's content (seeded) and the screens of its apps.

:class:`WorldData` is everything an episode's apps show: orders, contacts and threads, notes, calendar
events, settings, web pages and files, drawn deterministically from a seed. :func:`build_screen` turns
the navigation state into a :class:`~causalcache_lab.world.render.Screen` whose clickable elements
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

from dataclasses import dataclass, field

from causalcache_lab.world.content import (
    CODE_SENDERS,
    FOLDERS,
    PRODUCTS,
    SETTING_PAGES,
    TOGGLES,
    WorldData,
    make_world_data,
)
from causalcache_lab.world.render import (
    ACCENTS,
    BUBBLE_IN,
    BUBBLE_OUT,
    HEADING,
    HOME_ACCENT,
    WHITE,
    Layout,
    Screen,
)

__all__ = [
    "APPS",
    "CODE_SENDERS",
    "FOLDERS",
    "SETTING_PAGES",
    "NavState",
    "WorldData",
    "build_screen",
    "make_world_data",
]

#: app name -> accent colour
APPS: dict[str, tuple[int, int, int]] = ACCENTS


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
    from causalcache_lab.world.render import Element

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
