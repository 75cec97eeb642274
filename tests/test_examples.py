"""Every YAML file shipped under examples/ is loaded and validated by the loader it is written for."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load(path: Path) -> object:
    if path.name.startswith("selector_recipe"):
        from causalcache_memory.lab.selector.recipe import load_recipe

        return load_recipe(path)
    if path.name.startswith("hgkv_recipe"):
        from causalcache_memory.lab.hgkv.recipe import load_recipe

        return load_recipe(path)
    from causalcache_memory.config import load_config

    return load_config(path)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_yaml_validates(path: Path) -> None:
    assert _load(path) is not None


def test_there_are_example_yamls() -> None:
    assert {p.name for p in EXAMPLES.glob("*.yaml")} >= {
        "causalcache.yaml",
        "selector_recipe.yaml",
        "hgkv_recipe.yaml",
    }


def test_a_mistyped_key_in_an_example_config_is_reported(tmp_path) -> None:
    from causalcache_memory.config import load_config
    from causalcache_memory.errors import ConfigError

    text = (EXAMPLES / "causalcache.yaml").read_text(encoding="utf-8").replace("budget:", "budgett:", 1)
    bad = tmp_path / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match="budgett: unknown key"):
        load_config(bad)
