"""Parse desktop PyAutoGUI code (one step, possibly several lines) into one :class:`Action`.

The code is read with :mod:`ast` and only literal arguments are accepted; it is never executed.
Accepted calls (with or without the ``pyautogui.`` prefix): ``click``, ``leftClick``, ``doubleClick``,
``tripleClick``, ``rightClick``, ``moveTo``, ``dragTo``, ``mouseDown``/``mouseUp``, ``scroll``/``vscroll``,
``hscroll``, ``write``/``typewrite``, ``press``, ``hotkey`` (keys as arguments, ``hotkey('ctrl', 'end')``,
or as one list, ``hotkey(['ctrl', 'end'])`` / ``hotkey(keys=[...])``), ``keyDown``/``keyUp``;
``time.sleep``; the OpenCUA/AgentNet ``computer.*`` calls (``computer.terminate(status=..., answer=...)``,
``computer.wait()``, ``computer.triple_click(x=, y=)``, and ``computer.<any call above>``); and the bare
sentinels ``DONE``, ``WAIT`` and ``FAIL``. A triple click (``tripleClick``, ``computer.triple_click``,
``click(clicks=3)``) is a ``click`` with ``amount=3`` (never equivalent to a single click).

Several lines combine into one action: ``moveTo`` + ``dragTo`` (or ``mouseDown`` + ``moveTo`` +
``mouseUp``) is a drag, ``mouseDown`` + ``time.sleep`` + ``mouseUp`` in place is a long press, ``moveTo`` +
argument-less ``click()`` clicks there, ``click`` + ``write`` types at the clicked point, ``write`` +
``press('enter')`` types the text followed by a newline, and ``keyDown``/``press``/``keyUp`` chords are a
hotkey. Code holding two unrelated actions is rejected.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Any

from causalcache_memory.actions.coords import CoordMode, RawAction, build_action
from causalcache_memory.actions.model import TRIPLE_CLICKS, Action
from causalcache_memory.actions.normalize import normalize_key
from causalcache_memory.errors import ActionParseError

__all__ = ["is_pyautogui_code", "parse_pyautogui", "read_pyautogui"]

_MODULES = {"pyautogui", "computer", "time"}
_SENTINELS = {
    "DONE": ("done", {"status": "success"}),
    "FAIL": ("done", {"status": "failure"}),
    "WAIT": ("wait", {}),
}
_ACCEPTED = (
    "pyautogui.click/leftClick/doubleClick/tripleClick/rightClick/moveTo/dragTo/mouseDown/mouseUp/scroll/"
    "vscroll/hscroll/write/typewrite/press/hotkey/keyDown/keyUp, time.sleep, "
    "computer.terminate/wait/triple_click (and computer.<pyautogui call>), DONE, WAIT, FAIL"
)


class _Reader:
    """Walks the calls in order, tracking the pointer, the pressed button and held keys."""

    def __init__(self) -> None:
        self.pos: tuple[Any, Any] | None = None
        self.down_at: tuple[Any, Any] | None = None
        self.slept = 0.0
        self.held: list[str] = []
        self.chord_done = False
        self.moved = False
        self.out: list[RawAction] = []

    # -------------------------------------------------------------- helpers
    def point(self, fn: str, args: list[Any], kw: dict[str, Any], *, required: bool = True) -> tuple | None:
        x, y = kw.get("x"), kw.get("y")
        if args and isinstance(args[0], (tuple, list)):
            if len(args[0]) != 2:
                raise ActionParseError(f"{fn}({args[0]!r}): a point must be (x, y)")
            x, y = args[0]
        elif len(args) >= 2:
            x, y = args[0], args[1]
        elif len(args) == 1:
            raise ActionParseError(f"{fn}({args[0]!r}) has only one coordinate; give both x and y")
        if x is None and y is None:
            if self.pos is None and required:
                raise ActionParseError(
                    f"{fn}() has no coordinates and no earlier moveTo; write {fn}(x, y) with the target point"
                )
            return self.pos
        if x is None or y is None:
            raise ActionParseError(f"{fn}: missing coordinate (x={x!r}, y={y!r}); give both x and y")
        self.pos = (x, y)
        return self.pos

    def emit(self, type_: str, points: list | None = None, **fields: Any) -> None:
        self.out.append(RawAction(type_, [p for p in (points or []) if p is not None], fields))

    # -------------------------------------------------------------- calls
    def call(self, module: str | None, fn: str, args: list[Any], kw: dict[str, Any]) -> None:
        name = f"{module}.{fn}" if module else fn
        if module == "time" or (module is None and fn == "sleep"):
            if fn != "sleep":
                raise ActionParseError(f"call {name}(...) is not accepted; accepted: {_ACCEPTED}")
            self.slept += float(_num(args[0] if args else kw.get("secs", 0), name))
            return
        if module == "computer":
            return self.computer(fn, args, kw)
        handler = getattr(self, "fn_" + fn.lower(), None)
        if handler is None:
            raise ActionParseError(f"unknown function {name}(...); accepted: {_ACCEPTED}")
        handler(name, args, kw)

    def computer(self, fn: str, args: list[Any], kw: dict[str, Any]) -> None:
        if fn == "terminate":
            status = str(kw.get("status", args[0] if args else "success")).lower()
            answer = kw.get("answer")
            if answer:
                self.emit("answer", text=str(answer))
            else:
                self.emit("done", status="failure" if status in ("failure", "fail", "failed") else "success")
        elif fn == "wait":
            seconds = kw.get("seconds", args[0] if args else None)
            self.emit("wait", amount=None if seconds is None else float(_num(seconds, "computer.wait")))
        elif (handler := getattr(self, "fn_" + fn.lower().replace("_", ""), None)) is not None:
            handler(f"computer.{fn}", args, kw)  # computer.triple_click(x=, y=), computer.click(...)
        else:
            raise ActionParseError(f"unknown function computer.{fn}(...); accepted: {_ACCEPTED}")

    def fn_click(self, name: str, args: list, kw: dict) -> None:
        point = self.point(name, args, kw)
        button, clicks = str(kw.get("button", "left")).lower(), kw.get("clicks", 1)
        if button not in ("left", "right", "primary", "secondary"):
            raise ActionParseError(f"{name}(button={button!r}) is not supported; use 'left' or 'right'")
        if clicks not in (1, 2, 3):
            raise ActionParseError(
                f"{name}(clicks={clicks!r}) is not supported; use 1 (click), 2 (double) or 3 (triple)"
            )
        if button in ("right", "secondary"):
            self.emit("right_click", [point])
        elif clicks == 3:
            self.emit("click", [point], amount=TRIPLE_CLICKS)
        else:
            self.emit("double_click" if clicks == 2 else "click", [point])

    fn_leftclick = fn_click

    def fn_tripleclick(self, name: str, args: list, kw: dict) -> None:
        self.emit("click", [self.point(name, args, kw)], amount=TRIPLE_CLICKS)

    def fn_doubleclick(self, name: str, args: list, kw: dict) -> None:
        self.emit("double_click", [self.point(name, args, kw)])

    def fn_rightclick(self, name: str, args: list, kw: dict) -> None:
        self.emit("right_click", [self.point(name, args, kw)])

    def fn_moveto(self, name: str, args: list, kw: dict) -> None:
        self.point(name, args, kw)
        self.moved = True

    def fn_dragto(self, name: str, args: list, kw: dict) -> None:
        start = self.pos
        if start is None:
            raise ActionParseError(f"{name} needs a start point: put pyautogui.moveTo(x, y) before it")
        self.emit("drag", [start, self.point(name, args, kw)])

    def fn_mousedown(self, name: str, args: list, kw: dict) -> None:
        self.down_at = self.point(name, args, kw)
        self.slept = 0.0

    def fn_mouseup(self, name: str, args: list, kw: dict) -> None:
        if self.down_at is None:
            raise ActionParseError(f"{name} without an earlier mouseDown")
        end = self.point(name, args, kw)
        if end != self.down_at:
            self.emit("drag", [self.down_at, end])
        elif self.slept > 0:
            self.emit("long_press", [end], amount=self.slept)
        else:
            self.emit("click", [end])
        self.down_at = None

    def fn_scroll(self, name: str, args: list, kw: dict, horizontal: bool = False) -> None:
        clicks = float(_num(args[0] if args else kw.get("clicks"), f"{name} clicks"))
        anchor = self.point(name, args[1:], kw, required=False)
        if horizontal:
            direction = "right" if clicks > 0 else "left"
        else:
            direction = "up" if clicks > 0 else "down"
        self.emit("scroll", [anchor], direction=direction, amount=clicks)

    fn_vscroll = fn_scroll

    def fn_hscroll(self, name: str, args: list, kw: dict) -> None:
        self.fn_scroll(name, args, kw, horizontal=True)

    def fn_write(self, name: str, args: list, kw: dict) -> None:
        message = args[0] if args else kw.get("message")
        if isinstance(message, (list, tuple)):
            self.emit("key", keys=tuple(_key(k, name) for k in message))
        elif isinstance(message, str) and message:
            self.emit("type", text=message)
        else:
            raise ActionParseError(f"{name} needs non-empty text; got {message!r}")

    fn_typewrite = fn_write

    def fn_press(self, name: str, args: list, kw: dict) -> None:
        keys = args[0] if args else kw.get("keys")
        keys = tuple(keys) if isinstance(keys, (list, tuple)) else (keys,)
        keys = tuple(_key(k, name) for k in keys)
        if self.held:
            self.emit("hotkey", keys=(*self.held, *keys))
            self.chord_done = True
        else:
            self.emit("key", keys=keys)

    def fn_hotkey(self, name: str, args: list, kw: dict) -> None:
        if not args:
            args = [kw[k] for k in ("keys", "args") if k in kw][:1]
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = list(args[0])  # hotkey(['ctrl', 'end']): AgentNet/OpenCUA write the keys as one list
        if not args:
            raise ActionParseError(
                f"{name}() needs key names, e.g. hotkey('ctrl', 'c') or hotkey(['ctrl', 'c'])"
            )
        self.emit("hotkey", keys=tuple(_key(k, name) for k in args))

    def fn_keydown(self, name: str, args: list, kw: dict) -> None:
        self.held.append(_key(args[0] if args else kw.get("key"), name))
        self.chord_done = False

    def fn_keyup(self, name: str, args: list, kw: dict) -> None:
        if self.held and not self.chord_done:
            self.emit("hotkey" if len(self.held) > 1 else "key", keys=tuple(self.held))
            self.chord_done = True
        key = _key(args[0] if args else kw.get("key"), name)
        if key in self.held:
            self.held.remove(key)

    # -------------------------------------------------------------- result
    def result(self) -> RawAction:
        if self.held and not self.chord_done:
            self.fn_keyup("keyUp", [self.held[-1]], {})
        merged: list[RawAction] = []
        for raw in self.out:
            prev = merged[-1] if merged else None
            if prev and raw.type == "type" and prev.type == "click" and not raw.points:
                raw.points = prev.points
                merged[-1] = raw
            elif (
                prev
                and prev.type == "type"
                and raw.type == "key"
                and [normalize_key(k) for k in raw.fields["keys"]] == ["enter"]
            ):
                prev.fields["text"] += "\n"
            else:
                merged.append(raw)
        if len(merged) > 1:
            kinds = ", ".join(r.type for r in merged)
            raise ActionParseError(
                f"the code holds {len(merged)} actions ({kinds}); one step must be one action"
            )
        if merged:
            return merged[0]
        if self.moved and self.pos is not None:
            return RawAction("move", [self.pos])
        if self.slept > 0:
            return RawAction("wait", fields={"amount": self.slept})
        raise ActionParseError(f"the code performs no action; accepted: {_ACCEPTED}")


def _num(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ActionParseError(f"{what}={value!r} must be a number")
    return float(value)


def _key(value: Any, fn: str) -> str:
    if not isinstance(value, str) or not value:
        raise ActionParseError(f"{fn}: key name {value!r} must be a non-empty string such as 'enter'")
    return value if value in (" ", "\n") else value.lower()


def _literal(node: ast.expr, fn: str) -> Any:
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        raise ActionParseError(
            f"argument `{ast.unparse(node)}` of {fn}(...) must be a literal number or string"
        ) from None


def _callee(node: ast.expr) -> tuple[str | None, str]:
    if isinstance(node, ast.Name):
        return None, node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        if node.value.id not in _MODULES:
            raise ActionParseError(
                f"call {node.value.id}.{node.attr}(...) is not allowed; accepted: {_ACCEPTED}"
            )
        return node.value.id, node.attr
    raise ActionParseError(f"call `{ast.unparse(node)}(...)` is not allowed; accepted: {_ACCEPTED}")


def is_pyautogui_code(text: str) -> bool:
    """Whether ``text`` as a whole is Python made only of imports, action calls (``pyautogui.*``,
    ``computer.*``, ``time.*`` or a bare call such as ``click(1, 2)``) and the sentinels: a reply that
    is nothing but code, e.g. ``import pyautogui; pyautogui.click(1, 2)`` on one line."""
    try:
        tree = ast.parse(textwrap.dedent(text).strip())
    except SyntaxError:
        return False
    if not tree.body:
        return False
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            continue
        if not isinstance(stmt, ast.Expr):
            return False
        value = stmt.value
        if isinstance(value, ast.Name) and value.id.upper() in _SENTINELS:
            continue
        if not isinstance(value, ast.Call):
            return False
        func = value.func
        named = isinstance(func, ast.Name)
        if not named and not (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in _MODULES
        ):
            return False
    return True


def _statement(stmt: ast.stmt, reader: _Reader) -> None:
    if isinstance(stmt, (ast.Import, ast.ImportFrom)):
        names = [stmt.module] if isinstance(stmt, ast.ImportFrom) else [a.name for a in stmt.names]
        if any(n not in _MODULES for n in names):
            raise ActionParseError(f"`{ast.unparse(stmt)}`: only pyautogui and time may be imported")
        return
    if isinstance(stmt, ast.Expr):
        value = stmt.value
        label = (
            value.id
            if isinstance(value, ast.Name)
            else value.value
            if isinstance(value, ast.Constant)
            else None
        )
        if isinstance(label, str) and label.strip().upper() in _SENTINELS:
            kind, fields = _SENTINELS[label.strip().upper()]
            reader.emit(kind, None, **fields)
            return
        if isinstance(value, ast.Call):
            module, fn = _callee(value.func)
            name = f"{module}.{fn}" if module else fn
            args = [_literal(a, name) for a in value.args]
            kw = {k.arg: _literal(k.value, name) for k in value.keywords if k.arg is not None}
            reader.call(module, fn, args, kw)
            return
    raise ActionParseError(
        f"statement `{ast.unparse(stmt)[:80]}` is not an action call; accepted: {_ACCEPTED}"
    )


def read_pyautogui(code: str) -> RawAction:
    """One step of PyAutoGUI code as a :class:`RawAction` (coordinates as written, not yet converted)."""
    if not isinstance(code, str) or not code.strip():
        raise ActionParseError(f"empty PyAutoGUI code {code!r}; expected e.g. pyautogui.click(540, 320)")
    source = textwrap.dedent(code).strip()
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise ActionParseError(
            f"PyAutoGUI code is not valid Python ({err.msg}, line {err.lineno}): {source[:120]!r}"
        ) from None
    reader = _Reader()
    for stmt in tree.body:
        _statement(stmt, reader)
    return reader.result()


def parse_pyautogui(
    code: str, *, screen_size: tuple[int, int] | None = None, coords: CoordMode = "auto"
) -> Action:
    """Parse one step of PyAutoGUI code into an :class:`Action` (coordinates as in :mod:`.coords`)."""
    return build_action(read_pyautogui(code), screen_size=screen_size, coords=coords)
