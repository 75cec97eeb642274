"""The external-style world: a task's apps behind a generator's screens, stepped by actions.

State: the foreground app (``""`` = launcher / desktop / portal), the view (``launcher``, ``home`` = the
app's list, ``item`` = one item's detail screen, ``form`` = the ``New entry`` form), the open item, the
list's scroll offset, the form's values and the forms submitted so far. Actions (pixel points are the
action's relative point on the current screen):

* ``open_app <App>`` -> the app's list; a click on an element whose ``on_click`` is ``open:<item>`` ->
  that item, ``form`` -> the form, ``submit`` -> the form is submitted (kept in ``submitted``) and the
  app's list shows again, ``nav:<App>`` -> that app's list;
* ``type`` at a point on a ``field:<name>`` element sets that field; ``scroll down``/``up`` moves a long
  list by one page; ``done`` ends the episode. Anything else leaves the state as it is.

The world is deterministic: no dropped taps (the generators test the selector's reading of *screens*;
the recency mechanisms of the world family are not rebuilt here).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from causalcache_lab.worlds_ext.generators import generator
from causalcache_lab.worlds_ext.screen import Screen, render

if TYPE_CHECKING:
    from causalcache_lab.worlds_ext.tasks import ExtTask
    from causalcache_memory.actions.model import Action

__all__ = ["ExtState", "ExtStepInfo", "ExtWorld"]


@dataclass
class ExtState:
    """Mutable state of one episode (see the module docstring)."""

    app: str = ""
    view: str = "launcher"
    item: str | None = None
    scroll: int = 0
    form: dict[str, str] = field(default_factory=dict)
    submitted: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    step: int = 0
    done: bool = False


@dataclass(frozen=True)
class ExtStepInfo:
    """What one step did: the app after it, whether the episode ended, and whether the new screen shows
    the task's needed value (``evidence = (0,)``; ground truth for the oracle arm, never for a policy)."""

    app_after: str
    done: bool
    evidence: tuple[int, ...] = ()
    screen_text: str = ""


class ExtWorld:
    """One episode of ``task`` on its generator's screens."""

    def __init__(self, task: ExtTask) -> None:
        self.task = task
        self.gen = generator(task.generator)
        self.s = ExtState()

    # ------------------------------------------------------------------ views
    @property
    def app(self) -> str:
        return self.s.app or "Home"

    @property
    def steps(self) -> int:
        return self.s.step

    @property
    def size(self) -> tuple[int, int]:
        return self.gen.size

    def screen(self) -> Screen:
        return self.gen.layout(self.task, self.s)

    def screenshot(self) -> bytes:
        return render(self.screen())[0]

    def screen_text(self) -> str:
        """The current screen in the generator's text format (a11y dump, OCR lines, view hierarchy)."""
        return self.gen.serialize(self.screen())

    def state(self) -> dict[str, Any]:
        return {"app": self.s.app, "view": self.s.view, "submitted": list(self.s.submitted)}

    def evidence_visible(self) -> tuple[int, ...]:
        value = self.task.needed_value
        if value is None:
            return ()
        return (0,) if any(value in e.text for e in self.screen().elements) else ()

    # ------------------------------------------------------------------ stepping
    def step(self, action: Action) -> tuple[bytes, ExtStepInfo]:
        """Apply ``action``; returns the new screenshot and what happened."""
        s = self.s
        kind = action.type
        if kind == "open_app" and action.text:
            if any(a.name == action.text for a in self.task.apps):
                s.app, s.view, s.item, s.scroll = action.text, "home", None, 0
        elif kind == "click" and action.x is not None and action.y is not None:
            x, y = action.pixel(*self.size) or (0, 0)
            hit = self.screen().at(x, y)
            if hit is not None and hit.on_click:
                self._click(hit.on_click)
        elif kind == "type" and action.x is not None and action.y is not None and s.view == "form":
            x, y = action.pixel(*self.size) or (0, 0)
            hit = self.screen().at(x, y)
            if hit is not None and hit.on_click and hit.on_click.startswith("field:"):
                s.form[hit.on_click[6:]] = action.text or ""
        elif kind == "scroll" and s.view == "home":
            app = self.task.app(s.app)
            pages = max(0, (len(app.listing) - 1) // self.gen.list_rows)
            step = 1 if action.direction == "down" else -1 if action.direction == "up" else 0
            s.scroll = min(pages, max(0, s.scroll + step))
        elif kind == "back" and s.view in ("item", "form"):
            s.view, s.item = "home", None
        elif kind == "done":
            s.done = True
        s.step += 1
        png = self.screenshot()
        return png, ExtStepInfo(self.app, s.done, self.evidence_visible(), self.screen_text())

    def _click(self, what: str) -> None:
        s = self.s
        verb, _, arg = what.partition(":")
        if verb == "open" and s.app:
            s.view, s.item = "item", arg
        elif verb == "form" and s.app:
            s.view, s.item, s.form = "form", None, {}
        elif verb == "submit" and s.view == "form":
            s.submitted.append((s.app, dict(s.form)))
            s.view, s.form = "home", {}
        elif verb == "nav":
            s.app, s.view, s.item, s.scroll = arg, "home", None, 0
