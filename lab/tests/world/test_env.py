from __future__ import annotations

from causalcache_lab.world import GuiWorld, generate_tasks, ocr_png
from causalcache_lab.world.expert import element_action
from causalcache_memory.actions import Action


def _click(world: GuiWorld, label: str):
    element = next(e for e in world.screen().elements if e.label == label and e.action)
    return world.step(element_action("click", element, world.size, target=label))


def test_rendering_is_deterministic_from_the_seed():
    a, b = generate_tasks(3, seed=11), generate_tasks(3, seed=11)
    assert [t.goal for t in a] == [t.goal for t in b]
    for ta, tb in zip(a, b, strict=False):
        wa, wb = GuiWorld(ta), GuiWorld(tb)
        _click(wa, "Shop")
        _click(wb, "Shop")
        assert wa.screenshot() == wb.screenshot()
    other = generate_tasks(3, seed=12)
    w1, w2 = GuiWorld(a[0]), GuiWorld(other[0])
    for w in (w1, w2):
        _click(w, "Messages")
    assert w1.screenshot() != w2.screenshot()


def test_navigation_typing_and_outputs():
    world = GuiWorld(seed=5, platform="mobile")
    _png, info = _click(world, "Messages")
    assert info.app == "Home" and info.app_after == "Messages" and info.changed
    contact = world.data.contacts[0]
    _click(world, contact)
    field = next(e for e in world.screen().elements if e.kind == "field")
    world.step(element_action("type", field, world.size, text="hello 42"))
    assert "hello 42" in {line.text for line in ocr_png(world.screenshot()).lines}
    _click(world, "Send")
    assert world.outputs["sent"] == [(contact, "hello 42")]
    _, info = world.step(Action("open_app", text="Shop"))
    assert info.app_after == "Shop"
    world.step(Action("open_app", text="Messages"))
    assert world.screen().title == contact  # apps resume where they were left
    world.step(Action("back"))
    world.step(Action("back"))
    assert world.app == "Home"
    _, info = world.step(Action("click", x=0.99, y=0.99))
    assert info.hit is None and not info.changed
    _, info = world.step(Action("done", status="success"))
    assert info.done and world.state().done


def test_reset_restores_the_first_screen_and_state():
    world = GuiWorld(seed=8, platform="desktop")
    first = world.screenshot()
    _click(world, "Settings")
    _click(world, "Wi-Fi")
    assert world.screenshot() != first
    toggles = dict(world.data.toggles)
    assert world.reset() == first
    assert world.data.toggles != toggles and world.steps == 0
