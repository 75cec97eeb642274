"""One thread through LangGraph's own server (``langgraph dev``, in-memory runtime) with the deployable
example ``examples/langgraph_deploy``; the memory's trace is read back from the archive.

Needs the ``langgraph-server`` extra (``langgraph-cli[inmem]``); skipped without it."""

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

pytest.importorskip("langgraph_api")
pytest.importorskip("langgraph_runtime_inmem")
sdk = pytest.importorskip("langgraph_sdk")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_deploy"
CLI = Path(sys.executable).with_name("langgraph")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
@pytest.mark.skipif(not CLI.exists(), reason="the langgraph CLI is not installed next to this Python")
def test_one_thread_through_langgraph_dev_records_every_step(tmp_path):
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.cli.report import find_thread_head
    from causalcache_memory.trace_store import TraceStore

    app = tmp_path / "app"
    shutil.copytree(EXAMPLE, app, ignore=shutil.ignore_patterns(".causalcache", "__pycache__"))
    port = _free_port()
    server = subprocess.Popen(
        [str(CLI), "dev", "--no-browser", "--no-reload", "--port", str(port)],
        cwd=app,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
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
            assert server.poll() is None, "langgraph dev exited"
            assert time.monotonic() < deadline, "langgraph dev did not start"
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
