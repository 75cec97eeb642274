"""The runtime registry lives in the runtime layer; the lab registers its `simulated` runtime."""

from __future__ import annotations

import subprocess
import sys

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
    assert "`simulated` runtime is registered by `import causalcache_memory.lab`" in str(info.value)

    class Mine:
        def __init__(self, options):
            self.options = options

    registry.register_runtime("mine", lambda config: Mine(config.options))
    built = registry.build_policy(parse_config({"policy": {"kind": "mine", "options": {"a": 1}}}).policy)
    assert isinstance(built, Mine) and built.options == {"a": 1}


def test_the_lab_registers_the_simulated_runtime() -> None:
    # a fresh interpreter: the runtime layer alone does not know `simulated`; importing the lab adds it
    code = (
        "from causalcache_memory.runtime.registry import available_runtimes\n"
        "print('simulated' in available_runtimes())\n"
        "import causalcache_memory.lab\n"
        "print('simulated' in available_runtimes())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
    import causalcache_memory.lab  # noqa: F401

    policy = registry.build_policy(parse_config({"policy": {"kind": "simulated"}}).policy)
    assert type(policy).__name__ == "SimulatedPolicy"


def test_cli_validate_checks_the_runtime_name(tmp_path, capsys) -> None:
    from causalcache_memory.cli.main import main

    path = tmp_path / "c.yaml"
    path.write_text("policy:\n  kind: simulatd\n", encoding="utf-8")
    assert main(["config", "validate", str(path)]) == 1
    err = capsys.readouterr().err
    assert "policy.kind='simulatd' is not a registered runtime" in err and "simulated" in err
    path.write_text("policy:\n  kind: simulated\n", encoding="utf-8")
    assert main(["config", "validate", str(path)]) == 0
