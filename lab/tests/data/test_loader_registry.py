"""Dataset formats come from one registry; `causalcache data import` offers exactly its names."""

from __future__ import annotations

import re

import pytest

from causalcache_lab.data import loaders
from causalcache_memory.cli.main import main
from causalcache_memory.errors import ConfigError


def _import_choices(capsys) -> list[str]:
    """The formats ``causalcache data import --help`` offers (argparse prints ``{a,b,...}``)."""
    with pytest.raises(SystemExit):
        main(["data", "import", "--help"])
    found = re.search(r"\{([^}]*)\}\s+upstream format", capsys.readouterr().out)
    assert found is not None
    return found.group(1).split(",")


def test_cli_formats_are_the_registry(monkeypatch, capsys) -> None:
    assert _import_choices(capsys) == loaders.available_loaders()
    assert {"agentnet", "osworld", "mobileworld", "androidcontrol", "causalcache", "jsonl"} <= set(
        loaders.available_loaders()
    )
    monkeypatch.setattr(loaders, "LOADERS", loaders.LOADERS.copy())
    loaders.register_loader("mine", loaders.DatasetLoader(lambda src, archive: None))
    assert "mine" in _import_choices(capsys)


def test_unknown_format_lists_the_registered_ones() -> None:
    with pytest.raises(ConfigError) as info:
        loaders.load("agentnett", "x", None)
    assert "format='agentnett' is not a registered dataset format" in str(info.value)
    assert "agentnet, " in str(info.value)
    with pytest.raises(ConfigError, match="do not apply to format 'jsonl'"):
        loaders.load("jsonl", "x", None, images="y")
