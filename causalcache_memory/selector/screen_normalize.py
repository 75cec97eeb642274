"""One normaliser for screen text from real formats: accessibility dumps and OCR with desktop chrome.

The selector's ``text_*`` features (:mod:`~causalcache_memory.selector.text_features`) read a screen's
text as *what is drawn on it*, one line per text line: the synthetic worlds' exact OCR, on which the bundled
selector was trained. Real agents hand over other things: accessibility dumps whose lines carry roles,
bounds, coordinates, element ids and sizes, and OCR of whole desktops with a clock, a menu bar and a
taskbar. Read as is, every coordinate is a value-shaped token (``812``, ``344``) and new on every screen,
and a running clock is a new value on every screenshot; the value and novelty columns then describe the
dump's geometry, not its content. :func:`normalize_screen_text` maps each format to the drawn text:

* **Android view hierarchy** (uiautomator XML, ``<node text="Send" content-desc="" bounds="[0,0][1,1]"
  resource-id="..." class="..."/>``): one line per node with its ``text`` and its ``content-desc`` (when it
  differs); ``bounds``, ``resource-id``, ``class``, ``package``, ``index`` and the flags are dropped.
* **OSWorld's accessibility-tree table** (tab-separated, header ``tag name text class description
  position (top-left x&y) size (w&h)``): one line per row with ``name``, ``text`` and ``description``
  (duplicates once); ``tag``, ``class``, ``position`` and ``size`` are dropped. Headerless rows of at
  least five tab-separated fields whose last two are ``(x, y)`` pairs are read with the same columns.
* **Role + name lines** (``button "Save" [812,344,880,370]``, ``- link "Inbox (3)" [ref=e12]``,
  ``textbox "To" value="ann@x.org"``): the quoted name (and a ``value="..."``, which the field shows);
  the role, bounds and attributes are dropped. A line that is only a role (``group``, ``- list:``) is
  dropped.
* **Coordinates and ids anywhere**: ``@(x, y)``, ``[x0,y0,x1,y1]``, ``[x0,y0][x1,y1]``, ``(x, y)`` and
  ``(x, y, w, h)`` pairs, ``x=.. y=.. w=.. h=..``, ``bounds=``/``pos=``/``size=``/``center=``/``id=``/
  ``ref=``/``index=`` attributes (with ``=``: ``Order ID: 4411`` is content and stays) and a leading
  element index ``[12]`` are removed.
* **Desktop and status-bar chrome**: a line that is only a clock (``17:08``, ``5:08 PM``, ``Mon 7 Dec
  17:08``, ``9:41 5G 85%``), a clock at the end of a menu-bar or taskbar line (three or more of
  ``File Edit View Go Window Help ...``), and a line that is only a numeric date (``12/7/2026``). The
  screen keeps **one** clock line, ``09:41``, where its first clock was: that is what every screen of
  the training worlds shows (their status bar's fixed clock), so a real clock contributes exactly what the
  training clock contributed — one value, never new after the first screen — and a clock that ticks
  between screenshots is not new content.
* **OCR noise**: lines with no letter or digit are dropped; a word read with one of ``0``/``1``/``5`` in
  place of ``o``/``l``/``s`` between letters (``Inb0x``, ``Fi1es``) is read as the word, so it is not a
  value.

Everything else passes unchanged, line by line, in order. On the synthetic worlds' text the normaliser is
the identity (tested on every screen of training and development worlds), so the bundled selector's
features, and its guard, are unchanged there.

Examples (input -> output)::

    button "Save" [812,344,880,370]                       -> Save
    Invoice INV-4103 from Globex @(640,212)               -> Invoice INV-4103 from Globex
    <node text="Send" resource-id="a:id/send" bounds="[900,1800][1060,1900]"/>  -> Send
    push-button\tSave\t\tGtkButton\t\t(812, 344)\t(68, 26)  -> Save   (OSWorld table, header first)
    Mon 7 Dec 17:08                                       -> 09:41
    Finder File Edit View Go Window Help Mon 17:08        -> Finder File Edit View Go Window Help  (+ 09:41)

Cost: a few regular expressions per line, once per screen (the :class:`~causalcache_memory.selector.
screen_text.ScreenTextCache` caches the encoded text per content hash); never on a decision's hot path
for a screen already read.
"""

from __future__ import annotations

import html
import re

__all__ = ["CLOCK_LINE", "normalize_line", "normalize_screen_text"]

#: the one clock line a normalised screen keeps: the training worlds' status-bar clock
CLOCK_LINE = "09:41"

_NUM = r"-?\d+(?:\.\d+)?"
_PAIR = rf"[(\[]\s*{_NUM}\s*,\s*{_NUM}\s*(?:,\s*{_NUM}\s*,\s*{_NUM}\s*)?[)\]]"
_COORDS = re.compile(
    rf"@\s*{_PAIR}"  # @(x, y)
    rf"|\[\s*{_NUM}\s*,\s*{_NUM}\s*\]\s*\[\s*{_NUM}\s*,\s*{_NUM}\s*\]"  # Android bounds [x0,y0][x1,y1]
    rf"|{_PAIR}"  # (x, y), [x0,y0,x1,y1], (x, y, w, h)
)
_ATTR = re.compile(
    r"\b(?:x|y|w|h|width|height|left|top|right|bottom|bounds|bbox|box|pos|position|size|center|centre"
    r"|id|ref|index|idx|depth|resource-id|element_id|node_id)\s*=\s*"
    r"(?:\"[^\"]*\"|'[^']*'|[(\[][^)\]]*[)\]](?:\s*\[[^\]]*\])?|[\w.-]+)",
    re.IGNORECASE,
)
_FLAGS = re.compile(
    r"\[(?:checked|disabled|selected|expanded|focused|active|pressed|focusable|clickable|cursor=\w+|"
    r"level=\d+)(?:=\w+)?\]",
    re.IGNORECASE,
)
_LEAD_INDEX = re.compile(r"^\s*\[\d+\]\s*")
_ROLES = (
    "alert|application|article|banner|button|cell|check ?box|checkbox|column ?header|combo ?box|combobox|"
    "complementary|contentinfo|dialog|document|document ?web|edit|entry|figure|filler|form|frame|generic|"
    "grid|gridcell|group|heading|icon|image|img|label|layered ?pane|link|list|list ?box|listbox|list ?item|"
    "listitem|main|menu|menu ?bar|menubar|menu ?item|menuitem|navigation|none|page ?tab|page ?tab ?list|"
    "panel|paragraph|password ?text|presentation|progress ?bar|push ?button|push-button|radio|radio ?button|"
    "region|row|row ?header|scroll ?bar|scroll ?pane|search|searchbox|section|separator|slider|spin ?button|"
    "split ?pane|static|static ?text|status|status ?bar|tab|table|table ?cell|tablist|tabpanel|text|"
    "text ?box|textbox|textfield|text ?field|tool ?bar|toolbar|tool ?tip|tooltip|tree|tree ?item|treeitem|"
    "view|window|statictext|rootwebarea|webarea|unknown"
)
_ROLE_NAME = re.compile(rf"^\s*(?:-\s*)?(?:{_ROLES})\s*:?\s*\"((?:[^\"\\]|\\.)*)\"(.*)$", re.IGNORECASE)
_ROLE_ONLY = re.compile(rf"^\s*(?:-\s*)?(?:{_ROLES})\s*:?\s*$")  # lower case: "Search" is a label
_VALUE_ATTR = re.compile(r"\bvalue\s*[=:]\s*\"((?:[^\"\\]|\\.)*)\"", re.IGNORECASE)
_TIME = r"\d{1,2}:\d{2}(?::\d{2})?(?:\s*[AaPp]\.?[Mm]\.?)?"
_DAY = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*\.?,?"
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?,?"
_DATE_PART = (
    rf"(?:{_DAY}|{_MONTH}|\d{{1,2}}(?:st|nd|rd|th)?,?|\d{{4}},?|\d{{1,2}}[./-]\d{{1,2}}[./-]\d{{2,4}})"
)
_STATUS = r"(?:\d{1,3}\s*%|5G|4G|LTE|3G|Wi-?Fi|[^\w\s])"
_CLOCK_ONLY = re.compile(
    rf"^\s*(?:{_DATE_PART}\s+)*{_TIME}(?:\s+{_DATE_PART})*(?:\s*{_STATUS})*\s*$",
    re.IGNORECASE,
)
_CLOCK_TAIL = re.compile(rf"(?:\s+{_DATE_PART})*\s+{_TIME}(?:\s+{_DATE_PART})*\s*$", re.IGNORECASE)
_DATE_ONLY = re.compile(r"^\s*\d{1,2}[./-]\d{1,2}[./-]\d{2,4}\s*$")
_MENU_WORDS = frozenset(
    "file edit view go window help tools insert format history bookmarks selection run terminal image "
    "layer filter select navigate code refactor build debug start".split()
)
_OCR_SWAP = re.compile(r"\b([A-Za-z]{2,})([015])([A-Za-z]+)\b")
_SWAP = {"0": "o", "1": "l", "5": "s"}
_ALNUM = re.compile(r"[A-Za-z0-9]")
_DIGIT = re.compile(r"[015]")
_NODE = re.compile(r"<node\b([^>]*?)/?>", re.IGNORECASE)
_XML_ATTR = re.compile(r"([\w:-]+)\s*=\s*\"([^\"]*)\"")
_TABLE_HEADER = ("tag", "name")


def _fix_ocr_word(match: re.Match[str]) -> str:
    head, digit, tail = match.groups()
    if not (head[1:].islower() and tail.islower()):  # codes (TK0AB, X1Z) are values: left as they are
        return match.group()
    return head + _SWAP[digit] + tail


def _android(text: str) -> list[str] | None:
    """Lines of a uiautomator view-hierarchy dump (``text`` and ``content-desc`` per node), else None."""
    if "<node" not in text:
        return None
    out = []
    for node in _NODE.finditer(text):
        attrs = dict(_XML_ATTR.findall(node.group(1)))
        seen: list[str] = []
        for key in ("text", "content-desc"):
            value = " ".join(html.unescape(attrs.get(key, "")).split())
            if value and value not in seen:
                seen.append(value)
        if seen:
            out.append(" ".join(seen))
    return out


def _table_columns(header: list[str]) -> list[int] | None:
    names = [h.strip().lower() for h in header]
    if tuple(names[:2]) != _TABLE_HEADER:
        return None
    return [i for i, n in enumerate(names) if n in ("name", "text", "description")]


def _is_point(cell: str) -> bool:
    return bool(re.fullmatch(rf"\s*\(\s*{_NUM}\s*,\s*{_NUM}\s*\)\s*", cell))


def _table(lines: list[str]) -> list[str] | None:
    """Lines of an OSWorld accessibility-tree table (name, text, description per row), else None."""
    rows = [line.split("\t") for line in lines if line.strip()]
    if not rows or not any(len(r) >= 5 for r in rows):
        return None
    columns = _table_columns(rows[0])
    if columns is not None:
        rows = rows[1:]
    elif all(len(r) >= 5 and _is_point(r[-1]) and _is_point(r[-2]) for r in rows):
        columns = [1, 2, 4]  # tag, name, text, class, description, position, size
    else:
        return None
    out = []
    for row in rows:
        seen: list[str] = []
        for i in columns:
            cell = " ".join(row[i].split()) if i < len(row) else ""
            if cell and cell not in ("''", '""') and cell not in seen:
                seen.append(cell)
        if seen:
            out.append(" ".join(seen))
    return out


def _role_only(line: str) -> bool:
    head = line.lstrip()[:1]
    return (head == "-" or head.islower()) and _ROLE_ONLY.match(line) is not None


def normalize_line(line: str) -> str:
    """One line without roles, bounds, coordinates, ids and OCR letter/digit confusions ("" = drop it).

    A line no rule applies to is returned exactly as it is (spacing included). Clocks are handled per
    screen by :func:`normalize_screen_text`, not here. Each rule is tried only when a character it needs
    is on the line, so plain text costs a few character tests.
    """
    if _role_only(line):
        return ""
    out = line
    if '"' in out:
        role = _ROLE_NAME.match(out)
        if role is not None:
            value = _VALUE_ATTR.search(role.group(2))
            out = " ".join(p for p in (role.group(1), value.group(1) if value else "") if p)
    if "=" in out:
        out = _ATTR.sub(" ", out)
    if "(" in out or "[" in out or "@" in out:
        out = _FLAGS.sub(" ", _COORDS.sub(" ", _LEAD_INDEX.sub("", out)))
    if _DIGIT.search(out) is not None:
        out = _OCR_SWAP.sub(_fix_ocr_word, out)
    if out == line:
        return line if _ALNUM.search(line) else ""
    return "" if not _ALNUM.search(out) or _role_only(out) else " ".join(out.split())


def _split_clock(line: str) -> tuple[str, bool]:
    """``(line without its clock, whether it had one)`` for chrome lines; content lines pass as they are."""
    if ":" in line:
        if _CLOCK_ONLY.match(line):
            return "", True
        if len({w.lower() for w in line.split()} & _MENU_WORDS) >= 3:
            tail = _CLOCK_TAIL.search(line)
            if tail is not None:
                return line[: tail.start()].rstrip(), True
    elif line[:1].isdigit() and _DATE_ONLY.match(line):
        return "", False
    return line, False


def normalize_screen_text(text: str) -> str:
    """A screen's text as drawn (lines joined by ``"\\n"``) from any format of the module docstring.

    The identity on text that is already plain drawn text without chrome clocks other than a lone
    ``09:41`` (the synthetic worlds' screens).
    """
    lines = text.split("\n")
    structured = _android(text)
    if structured is None:
        structured = _table(lines)
    raw = structured if structured is not None else lines
    out: list[str] = []
    clock = False
    for line in raw:
        if not line.strip():
            continue
        plain = normalize_line(line)
        if not plain:
            continue
        plain, had_clock = _split_clock(plain)
        if plain:
            out.append(plain)
        if had_clock and not clock:
            out.append(CLOCK_LINE)
            clock = True
    return "\n".join(out)
