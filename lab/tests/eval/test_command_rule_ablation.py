"""lab/tools/command_rule_ablation.py removes exactly the normaliser's typed-command rule."""

from __future__ import annotations

from causalcache_memory.actions import Action
from causalcache_memory.selector import schema


def test_without_the_rule_a_typed_command_is_typing_and_the_back_key_is_still_navigation(
    load_tool, monkeypatch
):
    tool = load_tool("command_rule_ablation")
    group = schema.action_type_group
    monkeypatch.setattr(schema, "_TYPED_APP", schema._TYPED_APP)  # restored after the test
    monkeypatch.setattr(schema, "_TYPED_NAV", schema._TYPED_NAV)
    open_shop, go_back = Action("type", text="open Shop"), Action("type", text="go back")
    escape = Action("key", keys=("escape",))
    assert [group(a) for a in (open_shop, go_back, escape)] == [
        schema.GROUP_OF["open_app"],
        schema.GROUP_OF["back"],
        schema.GROUP_OF["back"],
    ]
    tool.remove_command_rule()
    assert [group(a) for a in (open_shop, go_back, escape)] == [
        schema.GROUP_OF["type"],
        schema.GROUP_OF["type"],
        schema.GROUP_OF["back"],
    ]
