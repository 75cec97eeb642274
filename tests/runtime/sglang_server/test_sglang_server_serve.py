"""``causalcache serve``: the SGLang command and environment, adapter pre-checks, and the start-up
self-check against stand-in server processes (a plugin-active one and a stock one)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from causalcache_memory.cli.main import build_parser, main
from causalcache_memory.cli.serve import launch, sglang_command

HERE = Path(__file__).resolve().parent


def _args(*extra: str):
    return build_parser().parse_args(["serve", "--model", "/models/qwen", *extra])


def test_command_sets_the_plugin_environment_and_flags(tmp_path):
    argv, env = sglang_command(
        _args("--adapter", str(tmp_path), "--expect-rank", "8", "--", "--log-level", "info")
    )
    assert argv[1:3] == ["-m", "sglang.launch_server"]
    assert argv[argv.index("--model-path") + 1] == "/models/qwen"
    assert "--enable-deterministic-inference" in argv and "--disable-radix-cache" not in argv
    assert argv[argv.index("--cuda-graph-backend-prefill") + 1] == "disabled"
    assert argv[-2:] == ["--log-level", "info"]
    assert env["SGLANG_EXTERNAL_MODEL_PACKAGE"] == "causalcache_memory.runtime.sglang_server.models"
    assert (
        env["SGLANG_EXTERNAL_MM_PROCESSOR_PACKAGE"] == "causalcache_memory.runtime.sglang_server.processors"
    )
    assert env["CAUSALCACHE_HGKV_ADAPTER"] == str(tmp_path.resolve())
    assert env["CAUSALCACHE_HGKV_EXPECT"] == '{"r": 8}'
    fast, _ = sglang_command(_args("--profile", "fast"))
    assert "--enable-deterministic-inference" not in fast and "--chunked-prefill-size" in fast


def test_dry_run_prints_the_command(capsys):
    assert main(["serve", "--model", "/m", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "SGLANG_EXTERNAL_MODEL_PACKAGE=" in out and "sglang.launch_server" in out and "frozen model" in out


def test_untrained_or_ungated_adapter_is_refused_before_launch(tmp_path, capsys):
    pytest.importorskip("safetensors")
    from adapter_files import write_adapter

    zero = write_adapter(tmp_path / "zero", layers=(6, 7), num_layers=8, hidden=64, kv=32, scale=0.0)
    assert main(["serve", "--model", "/m", "--adapter", str(zero), "--dry-run"]) == 1
    assert "untrained" in capsys.readouterr().err
    assert main(["serve", "--model", "/m", "--adapter", str(zero), "--dry-run", "--allow-zero-adapter"]) == 0
    ungated = write_adapter(tmp_path / "ungated", layers=(6, 7), num_layers=8, hidden=64, kv=32, gated=False)
    assert main(["serve", "--model", "/m", "--adapter", str(ungated), "--dry-run"]) == 1
    assert "ungated" in capsys.readouterr().err


def test_missing_sglang_names_the_extra(capsys):
    from causalcache_memory._optional import is_available

    if is_available("sglang"):  # pragma: no cover - never on the CPU CI
        pytest.skip("sglang is installed")
    assert main(["serve", "--model", "/m"]) == 1
    assert "sglang" in capsys.readouterr().err


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("mode", "ready"), [("plugin", True), ("stock", False)])
def test_launcher_reports_ready_only_when_the_plugin_is_active(mode, ready, capsys):
    port = _port()
    argv = [sys.executable, str(HERE / "fake_sglang_server.py"), str(port), mode]
    code, proc = launch(argv, {}, f"http://127.0.0.1:{port}", adapter=True, startup_timeout_s=60, wait=False)
    try:
        out, err = capsys.readouterr()
        if ready:
            assert code == 0 and proc is not None and proc.poll() is None
            assert f"ready at http://127.0.0.1:{port}" in out
        else:
            assert code == 1 and proc is None
            assert "NOT active" in err and "ready at" not in out
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=10)


def _wait_listening(port: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert time.monotonic() < deadline, f"nothing listens on port {port}"
            time.sleep(0.1)


@pytest.mark.parametrize(("mode", "ready"), [("http", True), ("grpc", False)])
def test_launcher_checks_the_plugin_through_the_gateway(mode, ready, capsys):
    port, gw_port = _port(), _port()
    worker = f"http://127.0.0.1:{port}"
    gateway = subprocess.Popen([sys.executable, str(HERE / "fake_gateway.py"), str(gw_port), worker, mode])
    argv = [sys.executable, str(HERE / "fake_sglang_server.py"), str(port), "plugin"]
    try:
        _wait_listening(gw_port)
        code, proc = launch(
            argv,
            {},
            worker,
            adapter=True,
            startup_timeout_s=60,
            wait=False,
            gateway_url=f"http://127.0.0.1:{gw_port}",
        )
        out, err = capsys.readouterr()
        if ready:
            assert code == 0 and proc is not None and f"through the gateway http://127.0.0.1:{gw_port}" in out
            proc.terminate()
            proc.wait(timeout=10)
        else:
            assert code == 1 and proc is None and "ready at" not in out
            assert "NOT through the gateway" in err and "HTTP mode" in err
    finally:
        gateway.terminate()
        gateway.wait(timeout=10)
