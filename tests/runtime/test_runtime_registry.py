"""The runtime registry lives in the runtime layer; the lab adds its `simulated` runtime by entry point."""

from __future__ import annotations

import pytest

from causalcache_memory.config import parse_config
from causalcache_memory.errors import ConfigError
from causalcache_memory.runtime import registry


def test_builtin_runtimes_and_unknown_name(monkeypatch) -> None:
    monkeypatch.setattr(registry, "RUNTIMES", registry.RUNTIMES.copy())
    assert {"openai", "sglang", "transformers"} <= set(registry.available_runtimes())
    cfg = parse_config({"policy": {"kind": "nope"}})  # the core config does not know the runtimes
    with pytest.raises(ConfigError) as info:
        registry.build_policy(cfg.policy)
    assert "policy.kind='nope' is not a registered runtime" in str(info.value)
    assert "openai, " in str(info.value) and "register_runtime" in str(info.value)
    assert "`simulated` runtime comes with the lab (`pip install -e ./lab`)" in str(info.value)

    class Mine:
        def __init__(self, options):
            self.options = options

    registry.register_runtime("mine", lambda config: Mine(config.options))
    built = registry.build_policy(parse_config({"policy": {"kind": "mine", "options": {"a": 1}}}).policy)
    assert isinstance(built, Mine) and built.options == {"a": 1}
