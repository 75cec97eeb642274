"""kill -9 while a screenshot is still being written: no persisted checkpoint names a missing blob.

The memory writes each screenshot in the background while the model is called
(:class:`~causalcache_memory.archive.deferred.DeferredArchive`); its checkpointer persists nothing before
those writes are durable (docs/RELIABILITY.md, "Screenshot writes overlap the model call").
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import user_agent as ua

from causalcache_memory.errors import ArchiveError, TraceError
from causalcache_memory.trace.store import TraceStore

KILL_AT, STEPS = 3, 5


def _run(root: Path, *args: str) -> subprocess.CompletedProcess:
    script = Path(__file__).with_name("durable_agent.py")
    cmd = [sys.executable, str(script), "--root", str(root), "--steps", str(STEPS), "--kill-at", str(KILL_AT)]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, timeout=300)


def unreadable_screens(root: Path) -> list[str]:
    """Every screenshot (and trace-chain record) a persisted checkpoint or pending write of thread t1
    references but cannot read (the records go behind the same barrier as the screenshots)."""
    memory = ua.memory_for(str(root))
    archive, saver = memory.resolve_archive(), memory.checkpointer()
    heads = set()
    for tup in saver.list(ua.run_config("t1")):
        heads.add(tup.checkpoint["channel_values"].get("cc_head"))
        heads.update(value for _, channel, value in tup.pending_writes or () if channel == "cc_head")
    store, bad = TraceStore(archive), []
    for head in sorted(h for h in heads if h):
        try:
            trace = store.load_trace(head)
        except TraceError as exc:
            bad.append(f"{head[:12]} (record): {type(exc.__cause__).__name__}")
            continue
        for sha in {*trace.screenshots(), trace.current_screenshot} - {None}:
            try:
                archive.get_bytes(sha)
            except ArchiveError as exc:
                bad.append(f"{head[:12]} -> {sha[:12]}: {type(exc).__name__}")
    return bad


def test_kill_9_during_a_screenshot_write_leaves_no_checkpoint_naming_a_missing_blob(tmp_path) -> None:
    killed = _run(tmp_path)
    assert killed.returncode == -9, killed.stderr
    assert unreadable_screens(tmp_path) == []
    memory = ua.memory_for(str(tmp_path))  # after the restart the run resumes and records every step
    graph = ua.build_agent(memory, steps=STEPS, checkpointer=memory.checkpointer())
    graph.invoke(None, ua.run_config("t1"))
    assert len(memory.trace(graph, ua.run_config("t1"))) == STEPS


def test_without_the_barrier_the_same_kill_leaves_a_checkpoint_naming_a_missing_blob(tmp_path) -> None:
    """The control: it shows the check above can fail (the checkpoint outruns the screenshot's write)."""
    killed = _run(tmp_path, "--no-barrier")
    assert killed.returncode == -9, killed.stderr
    assert any("BlobNotFoundError" in line for line in unreadable_screens(tmp_path))
