"""The lab adds its ``simulated`` runtime to the library's runtime registry by entry point."""

from __future__ import annotations

import subprocess
import sys

from causalcache_memory.config import parse_config
from causalcache_memory.runtime import registry


def test_the_lab_adds_the_simulated_runtime_by_entry_point_not_by_import() -> None:
    # a fresh interpreter: listing the runtimes loads the `causalcache.runtimes` entry points (the lab's
    # `simulated`) without importing the lab; building it imports the lab; importing the lab registers nothing
    code = (
        "import sys\n"
        "import causalcache_lab\n"
        "print('causalcache_memory.runtime.registry' in sys.modules)\n"
        "from causalcache_memory.runtime.registry import available_runtimes, RUNTIMES\n"
        "print('simulated' in RUNTIMES._entries)\n"
        "print('simulated' in available_runtimes())\n"
        "print('causalcache_lab.world' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False", "True", "False"]
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
