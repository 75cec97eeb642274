"""The synthetic world as an environment: reset to a task, step with typed actions, get PNG screenshots.

:class:`GuiWorld` is one episode's state machine. Clicks hit the topmost clickable element whose box
contains the relative point; ``type`` focuses the field under its anchor (if given) and replaces the
field's text; ``open_app`` resumes the app where it was left; ``back`` pops the app's screen stack (to
the launcher from an app's root); ``home`` shows the launcher; ``scroll`` moves the current list;
``done`` ends the episode. Unknown or inapplicable actions leave the screen unchanged (they still cost a
step). The final state (:attr:`GuiWorld.outputs`, :attr:`WorldData.toggles`) is what task checkers read.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from causalcache_lab.world.apps import APPS, NavState, WorldData, build_screen, make_world_data
from causalcache_lab.world.family import V2, WorldSpec, world_spec
from causalcache_lab.world.render import (
    SCREEN_SIZES,
    Screen,
    encode_png,
    render_indices,
    restyle,
    skin_palette,
)
from causalcache_lab.world.vocab import decode
from causalcache_memory.actions.model import Action
from causalcache_memory.errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from causalcache_lab.world.tasks import Task

__all__ = ["KEYBOARD_FAIL", "MISS_TAP", "GuiWorld", "StepInfo", "WorldState"]

#: world slips of family worlds (``WorldSpec.recency``): a tap that does not register (the screen does not
#: change) and a ``type`` whose keyboard does not open (the text is lost); per action, deterministic from
#: the world seed, the step and the action. Set on the development worlds (docs/WORLD.md).
MISS_TAP = 0.05
KEYBOARD_FAIL = 0.08


@dataclass(frozen=True, slots=True)
class StepInfo:
    """What happened on one step.

    Attributes:
        app: foreground app *before* the action (the app the action was taken in; ``Home`` = launcher).
        app_after: foreground app after the action.
        hit: label of the element the action hit, if any.
        changed: whether the screen changed.
        done: whether the episode has ended.
        evidence: indices of the task's needed values the new screen shows (world ground truth, for
            the evidence oracle and demonstrations' metadata; policies never see it).
        screen_text: the new screen's text with rough positions (:meth:`GuiWorld.screen_text`), what an
            accessibility tree or OCR engine gives beside the PNG; an agent may pass it to the memory.
    """

    app: str
    app_after: str
    hit: str | None
    changed: bool
    done: bool
    evidence: tuple[int, ...] = ()
    screen_text: tuple[dict[str, Any], ...] = field(default=(), hash=False)

    @property
    def evidence_visible(self) -> bool:
        return bool(self.evidence)


@dataclass(frozen=True, slots=True)
class WorldState:
    """Final state read by task checkers."""

    outputs: dict[str, list[Any]]
    toggles: dict[str, bool]
    steps: int
    done: bool


class GuiWorld:
    """One episode of the synthetic world for ``task`` (or a bare world from ``seed``)."""

    def __init__(
        self,
        task: Task | None = None,
        *,
        seed: int = 0,
        platform: str = "mobile",
        spec: WorldSpec | None = None,
        slips: bool = True,
    ) -> None:
        self.task = task
        self.seed = task.world_seed if task is not None else int(seed)
        self.platform = task.platform if task is not None else platform
        if spec is None:
            spec = world_spec(str(task.metadata.get("world", "v2"))) if task is not None else V2
        self.spec = spec
        self.slips = bool(slips)
        self._palette = None if spec.skin == "v2" else skin_palette(spec.skin)
        if self.platform not in SCREEN_SIZES:
            raise ConfigError(f"platform={self.platform!r} must be one of {sorted(SCREEN_SIZES)}")
        self.size: tuple[int, int] = SCREEN_SIZES[self.platform]
        self._fresh_state()

    def _fresh_state(self) -> None:
        self.data: WorldData = make_world_data(self.seed)
        self.nav = NavState()
        self.outputs: dict[str, list[Any]] = {
            "sent": [],
            "notes": [],
            "verified": [],
            "tracked": [],
            "searched": [],
        }
        self.focused: str | None = None
        self.steps = 0
        self.done = False
        self._screen: Screen | None = None

    # ------------------------------------------------------------------ observation
    @property
    def app(self) -> str:
        return self.nav.app or "Home"

    def screen(self) -> Screen:
        if self._screen is None:
            screen = build_screen(self.data, self.nav, self.size, self.outputs)
            self._screen = restyle(screen, self.spec.layout, self.size)
        return self._screen

    def pixels(self) -> np.ndarray:
        import numpy as np

        palette = np.frombuffer(skin_palette(self.spec.skin), dtype=np.uint8).reshape(-1, 3)
        return palette[render_indices(self.screen(), self.size)]

    def screenshot(self) -> bytes:
        """PNG bytes of the current screen (palette PNG)."""
        return encode_png(render_indices(self.screen(), self.size), self._palette)

    def screen_text(self) -> list[dict[str, Any]]:
        """The screen's text as an accessibility tree or an OCR engine gives it: one entry per text line
        drawn on the current screen, ``{"text": str, "box": (x0, y0, x1, y1)}`` with the box relative to
        the screen size (``[0, 1]``, rough: the drawn text's cells), top to bottom, left to right.
        The label and the right-aligned detail of an element are separate lines, as OCR reads them."""
        w, h = self.size
        lines: list[tuple[int, int, str, tuple[float, float, float, float]]] = []
        for e in self.screen().elements:
            _col, row, n = e.text_cells()
            if e.label[:n].strip():
                x0, y0, x1, y1 = e.text_box_px()
                lines.append((y0, x0, e.label[:n].rstrip(), (x0 / w, y0 / h, x1 / w, y1 / h)))
            if e.detail:
                c1 = e.box[2] - 1 - len(e.detail)
                x0, y0 = c1 * 12, row * 16
                x1, y1 = x0 + 12 * len(e.detail), y0 + 16
                lines.append((y0, x0, e.detail, (x0 / w, y0 / h, x1 / w, y1 / h)))
        return [{"text": text, "box": box} for _, _, text, box in sorted(lines, key=lambda x: (x[0], x[1]))]

    def reset(self) -> bytes:
        """Back to the launcher with fresh content and outputs; returns the first screenshot."""
        self._fresh_state()
        return self.screenshot()

    def state(self) -> WorldState:
        return WorldState(
            {k: list(v) for k, v in self.outputs.items()}, dict(self.data.toggles), self.steps, self.done
        )

    def evidence_visible(self) -> tuple[int, ...]:
        """Indices of the task's needed values shown on the current screen (item key and value line)."""
        if self.task is None:
            return ()
        return self.task.evidence_in(self.screen().texts())

    # ------------------------------------------------------------------ dynamics
    def step(self, action: Action) -> tuple[bytes, StepInfo]:
        """Apply ``action``; returns the new screenshot and what happened."""
        app_before = self.app
        before = self.screen()
        hit = self._apply(action)
        self._screen = None
        after = self.screen()
        self.steps += 1
        info = StepInfo(
            app_before,
            self.app,
            hit,
            after.elements != before.elements,
            self.done,
            self.evidence_visible(),
            tuple(self.screen_text()),
        )
        return self.screenshot(), info

    def _slip(self, action: Action, rate: float) -> bool:
        """Whether the world drops ``action`` (a family world's missed tap or unopened keyboard)."""
        if not (self.spec.recency and self.slips):
            return False
        key = (
            f"{self.spec.world_id}:{self.seed}:{self.steps}:{action.type}:{action.x}:{action.y}:{action.text}"
        )
        draw = int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64
        return draw < rate

    def _apply(self, action: Action) -> str | None:
        if self.done:
            return None
        if self.spec.vocab != "touch":
            decoded = decode(self.spec.vocab, action)
            if decoded is None:
                return None  # navigation of another vocabulary: nothing happens
            action = decoded
        kind = action.type
        if kind in ("click", "double_click", "long_press") and self._slip(action, MISS_TAP):
            return None
        if kind == "type" and self._slip(action, KEYBOARD_FAIL):
            return None
        if kind in ("click", "double_click", "long_press"):
            x, y = action.pixel(*self.size) or (0, 0)
            element = self.screen().hit(x, y)
            if element is None:
                return None
            self._activate(element.action or ())
            return element.label
        if kind == "type":
            if action.x is not None and action.y is not None:
                x, y = action.pixel(*self.size) or (0, 0)
                element = self.screen().hit(x, y)
                if element is not None and element.action and element.action[0] == "focus":
                    self.focused = str(element.action[1])
            if self.focused is not None and self._field_visible(self.focused):
                self.nav.fields[self.focused] = action.text or ""
                return self.focused
            return None
        if kind == "open_app":
            name = next((a for a in APPS if a.lower() == (action.text or "").strip().lower()), None)
            if name is not None:
                self.nav.app = name
                self.focused = None
            return name
        if kind == "back":
            if self.nav.app is not None:
                stack = self.nav.stacks.setdefault(self.nav.app, [("root", "")])
                if len(stack) > 1:
                    stack.pop()
                else:
                    self.nav.app = None
            self.focused = None
            return None
        if kind == "home":
            self.nav.app = None
            self.focused = None
            return None
        if kind == "scroll" and self.nav.app is not None:
            step = 3 if action.direction in ("down", None) else -3
            key = self.nav.app
            self.nav.scroll[key] = max(0, min(6, self.nav.scroll.get(key, 0) + step))
            return None
        if kind in ("done", "answer"):
            self.done = True
        return None

    def _field_visible(self, field_id: str) -> bool:
        return any(e.action == ("focus", field_id) for e in self.screen().elements)

    def _activate(self, action: tuple[object, ...]) -> None:
        if not action:
            return
        op = action[0]
        if op == "app":
            self.nav.app = str(action[1])
            self.focused = None
        elif op == "push" and self.nav.app is not None:
            self.nav.stacks.setdefault(self.nav.app, [("root", "")]).append((str(action[1]), str(action[2])))
            self.focused = None
        elif op == "toggle":
            key = str(action[1])
            self.data.toggles[key] = not self.data.toggles[key]
        elif op == "focus":
            self.focused = str(action[1])
        elif op == "submit":
            self._submit(str(action[1]), str(action[2]))

    def _submit(self, form: str, field_id: str) -> None:
        text = self.nav.fields.pop(field_id, "").strip()
        if not text:
            return
        if form == "send":
            self.outputs["sent"].append((field_id.split(":", 1)[1], text))
        elif form == "note":
            self.outputs["notes"].append(text)
        elif form == "verify":
            self.outputs["verified"].append(text)
        elif form == "track":
            order = self.data.orders[int(field_id.split(":", 1)[1])]
            self.outputs["tracked"].append((order["number"], text))
        elif form == "search":
            self.outputs["searched"].append(text)
        self.focused = None
