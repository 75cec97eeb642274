"""Every YAML file shipped under examples/ is loaded and validated by the loader it is written for."""

from __future__ import annotations

from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(path: Path) -> object:
    if path.name.startswith("selector_recipe"):
        from causalcache_lab.selector.recipe import load_recipe

        return load_recipe(path)
    if path.name.startswith("learn"):
        from causalcache_lab.learn import load_learn_config

        return load_learn_config(path)
    if path.name.startswith("hgkv_recipe"):
        from causalcache_lab.hgkv.recipe import load_recipe

        return load_recipe(path)
    from causalcache_memory.config import load_config

    return load_config(path)


#: keys a loader renames (``ladder.json`` is stored as ``ladder.json_path``)
_RENAMED = {("ladder", "json"): ("ladder", "json_path")}


def _leaves(data: object, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], object]]:
    if isinstance(data, dict):
        return [leaf for key, value in data.items() for leaf in _leaves(value, (*prefix, str(key)))]
    return [(prefix, data)]


def _same(written: object, loaded: object) -> bool:
    """A written value and its loaded form (strings compare case-insensitively; relative paths resolve)."""
    if isinstance(written, list) and isinstance(loaded, list):
        return len(written) == len(loaded) and all(_same(a, b) for a, b in zip(written, loaded, strict=True))
    if isinstance(written, str) and isinstance(loaded, str):
        return loaded.lower() == written.lower() or loaded.endswith("/" + written.removeprefix("./"))
    return written == loaded


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_example_yaml_validates(path: Path) -> None:
    """Every value written in an example reaches the loaded config unchanged (nothing dropped or renamed)."""
    import yaml

    loaded = _load(path).model_dump(mode="json")  # type: ignore[attr-defined]
    written = _leaves(yaml.safe_load(path.read_text(encoding="utf-8")))
    assert written
    for keys, value in written:
        got: object = loaded
        for key in _RENAMED.get(keys, keys):
            assert isinstance(got, dict) and key in got, f"{path.name}: {'.'.join(keys)} was not loaded"
            got = got[key]
        assert _same(value, got), f"{path.name}: {'.'.join(keys)} = {value!r} was loaded as {got!r}"


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
