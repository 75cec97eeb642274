"""The real-data recipes under examples/recipes/ validate with the loader each is written for."""

from __future__ import annotations

from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[3] / "examples" / "recipes"


@pytest.mark.parametrize("path", sorted(RECIPES.glob("*.yaml")), ids=lambda p: p.name)
def test_recipe_validates(path: Path) -> None:
    if "hgkv" in path.name:
        from causalcache_lab.hgkv.recipe import load_recipe

        recipe = load_recipe(path)
        assert recipe.data.held_out_budgets == [8] and recipe.data.budgets == [1, 2, 4]
    elif "selector" in path.name:
        from causalcache_lab.selector.recipe import load_recipe

        recipe = load_recipe(path)
        assert recipe.policy is not None and "adapter" in recipe.policy.kwargs
    else:
        from causalcache_memory.config import load_config

        config = load_config(path)
        assert config.policy.transformers.adapter_path and config.allocation.selector.model_path


def test_there_are_three_recipes() -> None:
    assert len(list(RECIPES.glob("*.yaml"))) == 3
