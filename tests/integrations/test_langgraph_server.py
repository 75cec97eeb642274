"""One thread through LangGraph's own server (``langgraph dev``, in-memory runtime) with the deployable
example ``examples/langgraph_deploy``, driven over HTTP; the memory's trace is read back from the archive.

The server needs the ``langgraph-server`` extra (``langgraph-cli[inmem]``), whose protobuf/grpcio pins
conflict with the test environment's, so it lives in a virtual environment of its own: the test runs the
``langgraph`` command named by ``CAUSALCACHE_LANGGRAPH_CLI`` (``.ci/run`` creates that environment), else
the one next to this Python; skipped when there is none."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_deploy"
CLI = Path(os.environ.get("CAUSALCACHE_LANGGRAPH_CLI") or Path(sys.executable).with_name("langgraph"))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.service("langgraph-server")
@pytest.mark.skipif(
    not CLI.exists(), reason=f"no langgraph CLI at {CLI} (set CAUSALCACHE_LANGGRAPH_CLI; see .ci/run)"
)
def test_one_thread_through_langgraph_dev_records_every_step(tmp_path):
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.cli.report import find_thread_head
    from causalcache_memory.trace.store import TraceStore

    sdk = pytest.importorskip("langgraph_sdk")  # the HTTP client (a langgraph dependency)
    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns(".causalcache", "__pycache__"))
    port = _free_port()
    log = tmp_path / "langgraph-dev.log"
    with log.open("wb") as out:
        server = subprocess.Popen(
            [str(CLI), "dev", "--no-browser", "--no-reload", "--port", str(port)],
            cwd=app,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ok", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, f"langgraph dev exited: {log.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"langgraph dev did not start: {log.read_text()[-3000:]}"
            time.sleep(0.5)
        with sdk.get_sync_client(url=f"http://127.0.0.1:{port}") as client:
            thread = client.threads.create()["thread_id"]
            out = client.runs.wait(thread, "agent", input={"messages": [{"role": "user", "content": "Go"}]})
        assert out["steps"] == 8
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(30)
    archive = LocalArchive(app / ".causalcache" / "archive")  # relative to the YAML, not the cwd
    store = TraceStore(archive)
    head = find_thread_head(archive, store, thread)
    trace = store.load_trace(head, episode_id=thread)
    assert len(trace) == 8 and trace.events[0].summary == "1. click (412, 88)"
    assert "click (1650, 1040)" in trace.events[1].summary and trace.events[0].screen_size == (1920, 1080)
