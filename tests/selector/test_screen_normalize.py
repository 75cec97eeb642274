"""Screen text from real formats (issue 54 item 2): one normaliser, a table of formats, and the bundle's
features unchanged on the synthetic worlds' text."""

from __future__ import annotations

import pytest

from causalcache_memory.selector.screen_normalize import CLOCK_LINE, normalize_line, normalize_screen_text
from causalcache_memory.selector.screen_text import encode_text

# (format, raw screen text, the drawn text the selector must read)
FORMATS = [
    (
        "role + name + bounds",
        'window "Inbox - Mail" [0,0,1920,1080]\n'
        'button "Archive" [812,344,880,370]\n'
        'listitem "Invoice INV-4103 from Globex" [412,220,1500,248]\n'
        'textbox "Search mail" value="INV-4103" [60,90,400,120]\n'
        "group [0,0,10,10]\n"
        "generic",
        "Inbox - Mail\nArchive\nInvoice INV-4103 from Globex\nSearch mail INV-4103\n",
    ),
    (
        "element lines with @(x,y)",
        "Inbox @(120,88)\nInvoice INV-4103 from Globex @(640, 212)\nAmount due: $132.00 @(700,400)",
        "Inbox\nInvoice INV-4103 from Globex\nAmount due: $132.00",
    ),
    (
        "Playwright aria snapshot",
        '- navigation:\n  - link "Inbox (3)" [ref=e12]\n- heading "Invoice INV-4103" [level=2]\n'
        '- checkbox "Paid" [checked]',
        "Inbox (3)\nInvoice INV-4103\nPaid",
    ),
    (
        "indexed elements with attributes",
        "[0] Inbox x=12 y=80 w=100 h=24\n[1] Order ID: 4411 id=row-7 bounds=[0,0][100,20]",
        "Inbox\nOrder ID: 4411",
    ),
    (
        "Android view hierarchy XML",
        '<?xml version="1.0"?><hierarchy rotation="0">'
        '<node index="0" text="" resource-id="com.mail:id/list" class="android.widget.ListView" '
        'bounds="[0,210][1080,2200]"><node index="1" text="Order #526321" resource-id="com.mail:id/t7" '
        'class="android.widget.TextView" content-desc="" bounds="[48,300][700,360]"/>'
        '<node index="2" text="" content-desc="Send" class="android.widget.ImageButton" '
        'bounds="[900,1800][1060,1900]"/><node text="Desk &amp; Lamp" content-desc="Desk &amp; Lamp" '
        'bounds="[1,2][3,4]"/></node></hierarchy>',
        "Order #526321\nSend\nDesk & Lamp",
    ),
    (
        "OSWorld accessibility-tree table",
        "tag\tname\ttext\tclass\tdescription\tposition (top-left x&y)\tsize (w&h)\n"
        "push-button\tArchive\t\tGtkButton\t\t(812, 344)\t(68, 26)\n"
        "label\tInvoice INV-4103\tInvoice INV-4103\t\tfrom Globex\t(412, 220)\t(500, 28)\n"
        "frame\t\t\t\t\t(0, 0)\t(1920, 1080)",
        "Archive\nInvoice INV-4103 from Globex",
    ),
    (
        "OSWorld table without its header",
        "push-button\tArchive\t\tGtkButton\t\t(812, 344)\t(68, 26)\n"
        "label\tTotal\t$132.00\t\t\t(412, 220)\t(500, 28)",
        "Archive\nTotal $132.00",
    ),
    (
        "desktop OCR with chrome",
        "Finder File Edit View Go Window Help Mon 7 Dec 17:08\nInbox - Mail\nInvoice INV-4103\n|||\n"
        "Mon 7 Dec 17:09\n5:08 PM\n12/7/2026",
        f"Finder File Edit View Go Window Help\n{CLOCK_LINE}\nInbox - Mail\nInvoice INV-4103",
    ),
    (
        "mobile OCR with a status bar",
        "9:41 5G 85%\nMessages\nFrank\nCall me at 5:30",
        f"{CLOCK_LINE}\nMessages\nFrank\nCall me at 5:30",
    ),
    (
        "OCR letter/digit confusions",
        "Inb0x\nSett1ngs Fi1es\nTK0AB TK-3781",
        "Inbox\nSettlngs Files\nTK0AB TK-3781",
    ),
]


def _lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


@pytest.mark.parametrize(("name", "raw", "drawn"), FORMATS, ids=[f[0] for f in FORMATS])
def test_each_format_reads_as_its_drawn_text(name, raw, drawn) -> None:
    out = normalize_screen_text(raw)
    assert _lines(out) == _lines(drawn)
    # what the features see: the values and words of the drawn text, none of the dump's geometry
    blob, plain = encode_text(out), encode_text(drawn)
    assert (blob.values == plain.values).all() and blob.n_values == plain.n_values
    assert (blob.words == plain.words).all()


@pytest.mark.parametrize(("name", "raw", "drawn"), FORMATS, ids=[f[0] for f in FORMATS])
def test_the_normaliser_is_idempotent(name, raw, drawn) -> None:
    once = normalize_screen_text(raw)
    assert normalize_screen_text(once) == once


def test_coordinates_and_a_ticking_clock_are_not_values_or_new_words() -> None:
    screens = [
        f"Mon 7 Dec 17:{m:02d}\n"
        + "\n".join(f"Message {10 + i} @({100 + 37 * m + i},{200 + 24 * i})" for i in range(5))
        for m in range(3)
    ]
    raw = [encode_text(s) for s in screens]
    norm = [encode_text(normalize_screen_text(s)) for s in screens]
    assert raw[1].n_values > 10  # read as is, every coordinate and the clock are values, new per screen
    assert all(b.n_values == 6 for b in norm)  # the clock line and the five message numbers
    assert all((b.values == norm[0].values).all() and (b.words == norm[0].words).all() for b in norm)


def test_content_that_looks_like_chrome_stays() -> None:
    kept = [
        "Time: Tue 10:30",
        "Order ID: 4411",
        "Brightness: 70%",
        "Search",
        "Room: E-453",
        "  Desk Lamp  $27.99",
    ]
    assert [normalize_line(x) for x in kept] == kept
    assert normalize_screen_text("\n".join(kept)) == "\n".join(kept)
