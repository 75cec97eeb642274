"""Template split: fixed, stratified by grammar, disjoint; generate_tasks honours it."""

from __future__ import annotations

import pytest

from causalcache_lab.world import all_templates, generate_tasks, template_split, templates_in
from causalcache_lab.world.templates import GRAMMARS
from causalcache_memory.errors import ConfigError


def test_splits_are_disjoint_cover_every_template_and_every_grammar():
    parts = {s: set(templates_in(s)) for s in ("train", "dev", "eval")}
    assert parts["train"].isdisjoint(parts["eval"]) and parts["dev"].isdisjoint(parts["eval"])
    assert parts["train"].isdisjoint(parts["dev"])
    assert set().union(*parts.values()) == set(all_templates())
    for grammar in GRAMMARS:
        assert templates_in("train", grammar) and templates_in("eval", grammar), grammar
    assert all(template_split(t) == s for s, ts in parts.items() for t in ts)
    with pytest.raises(ConfigError, match="not a template"):
        template_split("single:moon>mars")
    with pytest.raises(ConfigError, match="templates="):
        templates_in("test")


@pytest.mark.parametrize(
    ("which", "platform"), [("train", "desktop"), ("eval", "mobile"), ("dev", "desktop")]
)
def test_generate_tasks_draws_only_from_the_requested_templates(which, platform):
    tasks = generate_tasks(40, seed=5, platform=platform, templates=which)
    assert {t.platform for t in tasks} == {platform}
    assert {template_split(t.template) for t in tasks} == {which}
    assert {t.split for t in tasks} == {"memory_critical", "control"}


def test_training_and_evaluation_tasks_share_no_template():
    train = {t.template for t in generate_tasks(200, seed=0, platform="desktop", templates="train")}
    evaluation = {t.template for t in generate_tasks(200, seed=0, platform="mobile", templates="eval")}
    assert train and evaluation and train.isdisjoint(evaluation)


def test_every_memory_template_crosses_apps_without_errands():
    """A memory-critical template's source app and use app differ, so its split never depends on errands."""
    from causalcache_lab.world.language import READS, USES

    for template in all_templates():
        grammar, rest = template.split(":", 1)
        if grammar == "control":
            continue
        kinds, use = rest.split(">")
        sources = {READS[kind][1] for kind in kinds.split("+")}
        assert sources - {USES[use][1]}, template  # some needed value comes from another app
