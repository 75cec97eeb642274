"""Actions are written in the summaries' units everywhere (issue 28): scroll amounts are kept and the
report's action lines are pixels on the screen the action acted on, as the summaries are."""

from __future__ import annotations

from causalcache_memory import Action
from causalcache_memory.summarize import action_text, default_summarizer


def test_scroll_summary_keeps_the_amount():
    scroll = Action("scroll", x=0.5, y=0.5, direction="down", amount=-3)
    assert default_summarizer(4, scroll, screen_size=(1281, 801)) == "4. scroll (640, 400) down 3"
    assert default_summarizer(4, Action("scroll", direction="up")) == "4. scroll up"


def test_action_text_uses_pixels_like_the_summary():
    action = Action("click", x=0.86, y=0.96)
    size = (1920, 1080)
    assert action_text(action.to_dict(), size) == "click (1650, 1036)"
    assert default_summarizer(2, action, screen_size=size) == "2. " + action_text(action, size)
    assert action_text(None, size) is None
    assert action_text({"type": "no-such-action"}, size) == '{"type": "no-such-action"}'
