"""Config models: defaults, every error reported at once with path/value/allowed, YAML loading, CLI."""

from __future__ import annotations

import json
import warnings

import pytest

from causalcache_memory.cli.main import main
from causalcache_memory.config import CausalCacheConfig, load_config, parse_config
from causalcache_memory.errors import CausalCacheWarning, ConfigError


def test_defaults_are_the_embedded_setup() -> None:
    cfg = CausalCacheConfig()
    assert cfg.budget == 4 and cfg.two_pass
    assert cfg.allocation.allocator == "selector"
    # no runtime is configured by default: nothing silently falls back to the simulated world policy
    assert cfg.policy.kind is None
    from causalcache_memory.runtime.registry import build_policy

    with pytest.raises(ConfigError, match=r"policy\.kind is not set"):
        build_policy(cfg.policy)
    assert cfg.checkpointer.kind == "sqlite"


def test_all_errors_reported_at_once() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(
            {
                "budget": -1,
                "alocation": {},
                "allocation": {"allocator": "smart", "selectr": {}},
                "archive": {"max_pixels": 0},
            }
        )
    errors = info.value.errors
    assert len(errors) == 5
    text = str(info.value)
    assert "budget: got -1" in text and "between 0 and 64" in text
    assert 'allocation.allocator: got "smart"' in text and "recent" in text
    assert "alocation: unknown key; allowed keys here: allocation, archive" in text
    assert (
        "allocation.selectr: unknown key; allowed keys here: allocator, batch_chunk, compare, explore, idle_warning, mean_b, priced, rgb_size, seed, selector"
        in text
    )
    assert "archive.max_pixels" in text


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"budget": "four"}, 'budget: got "four"'),
        ({"policy": {"kind": "sglang"}}, "policy.sglang section is missing"),
        ({"policy": {"kind": "sglang", "sglang": {"urls": ["localhost:30000"]}}}, "http://"),
        ({"checkpointer": {"kind": "postgres"}}, "checkpointer.uri"),
        ({"render": {"retained_header": "Step {step}"}}, "{index}"),
        (
            {"policy": {"kind": "transformers", "transformers": {"model_path": "m", "device": "tpu"}}},
            "device",
        ),
    ],
)
def test_specific_errors(data, fragment) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        parse_config(data)
    assert fragment in str(info.value)


def test_yaml_loading(tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("budget: 2\nallocation:\n  allocator: random\n  seed: 3\n", encoding="utf-8")
    cfg = load_config(path)
    assert cfg.budget == 2 and cfg.allocation.seed == 3
    path.write_text("", encoding="utf-8")
    assert load_config(path) == CausalCacheConfig()


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("budget: [1, 2\n", "invalid YAML at line"),
        ("- 1\n- 2\n", "must be a mapping"),
        ("budget: !!python/object:os.system 1\n", "invalid YAML"),
    ],
)
def test_bad_yaml(tmp_path, text, fragment) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert fragment in str(info.value)


def test_missing_file() -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config("/nonexistent/causalcache.yaml")


def test_cli_validate_and_schema(tmp_path, capsys) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("budget: 1\n", encoding="utf-8")
    assert main(["config", "validate", str(good)]) == 0
    assert "valid (budget=1" in capsys.readouterr().out
    bad = tmp_path / "bad.yaml"
    bad.write_text("budget: -3\nextra: 1\n", encoding="utf-8")
    assert main(["config", "validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "2 problems" in err and "budget" in err and "extra" in err
    assert main(["config", "schema"]) == 0
    schema = json.loads(capsys.readouterr().out)
    assert schema["additionalProperties"] is False
    assert "budget" in schema["properties"]


def test_missing_required_key_is_named() -> None:
    with pytest.raises(ConfigError) as info:
        parse_config({"policy": {"kind": "openai", "openai": {"model": "m"}}})
    assert "policy.openai.base_url: required key is missing" in str(info.value)


RENAMED = [
    ("second_pass_budget", "second_pass_share", 0.2),  # refused by name
    ("budget_window", "share_window", 50),  # refused by name
]


@pytest.mark.parametrize(("old", "new", "value"), RENAMED)
def test_a_renamed_selector_key_is_refused_naming_the_new_one(old, new, value) -> None:
    with pytest.raises(ConfigError, match=rf"allocation\.selector.*{old} was renamed {new}: write {new}"):
        parse_config({"allocation": {"allocator": "selector", "selector": {old: value}}})
    assert getattr(parse_config({"allocation": {"selector": {new: value}}}).allocation.selector, new) == value


def test_budget_zero_with_the_selector_is_warned_and_with_recent_is_not() -> None:
    """Issue 51 item 4: ``budget: 0`` leaves the selector nothing to choose."""
    with pytest.warns(CausalCacheWarning, match="allocation.allocator: recent"):
        parse_config({"budget": 0, "allocation": {"allocator": "selector"}})
    with pytest.warns(CausalCacheWarning, match="budget: 0"):
        parse_config({"budget": 0})  # the selector is the default allocator
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        parse_config({"budget": 0, "allocation": {"allocator": "recent"}})
        parse_config({"budget": 1, "allocation": {"allocator": "selector"}})
