"""docs/DEPLOY.md, followed: its local topology (moto S3, two fake SGLang workers, smg, two agent
processes) is run as written, with free ports instead of the fixed ones, and each agent completes an
episode whose trace reads back from the shared archive."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

from scaleout_support import free_port

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "DEPLOY.md"
PORTS = ("30000", "30001", "30002", "5000", "29000")


def doc_block(tag: str) -> str:
    """The fenced block of DEPLOY.md whose first line is ``# local-topology: <tag>``."""
    for body in re.findall(r"```[a-z]*\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S):
        first, _, rest = body.partition("\n")
        if first.strip() == f"# local-topology: {tag}":
            return rest
    raise AssertionError(f"docs/DEPLOY.md has no block tagged 'local-topology: {tag}'")


def test_documented_local_topology_runs_two_agents_to_the_end(tmp_path):
    ports = {p: str(free_port()) for p in PORTS}
    swap = re.compile(r"\b(" + "|".join(PORTS) + r")\b")
    config = swap.sub(lambda m: ports[m.group(1)], doc_block("fleet.yaml"))
    script = swap.sub(lambda m: ports[m.group(1)], doc_block("run"))
    # test-only: long-running servers stop by themselves even if this test dies first
    script = re.sub(r"^(moto_server|smg launch)", r"timeout --foreground -s KILL 240 \1", script, flags=re.M)
    script = script.replace("fake_worker.py --port", "fake_worker.py --lifetime 240 --port")
    assert len(re.findall(r" &(\s|$)", script)) == 6 and "wait $A1" in script  # 4 servers, 2 agents
    (tmp_path / "fleet.yaml").write_text(config, encoding="utf-8")
    (tmp_path / "tests").symlink_to(ROOT / "tests")  # the documented paths are relative to a checkout
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    out_path, err_path = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with open(out_path, "w") as out_f, open(err_path, "w") as err_f:  # servers keep pipes open: use files
        proc = subprocess.Popen(
            ["bash", "-e", "-c", script],
            cwd=tmp_path,
            env=env,
            stdout=out_f,
            stderr=err_f,
            start_new_session=True,
        )
    try:
        proc.wait(timeout=240)
        out, err = out_path.read_text(errors="replace"), err_path.read_text(errors="replace")
        assert proc.returncode == 0, f"stdout:\n{out[-3000:]}\nstderr:\n{err[-3000:]}"
        summaries = [json.loads(line) for line in out.splitlines() if line.startswith('{"episode"')]
        assert sorted(s["episode"] for s in summaries) == ["agent-1", "agent-2"]
        for s in summaries:
            assert s["verified"] and s["steps"] >= 2, s  # every step recorded once, read back from S3
            assert list(s["servers"]) == [f"http://127.0.0.1:{ports['30000']}"]  # through the gateway
        _check_archive(ports["5000"], {s["episode"]: s for s in summaries})
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the servers the script left running
        proc.wait(10)


def _check_archive(moto_port: str, summaries: dict) -> None:
    """A third process view of the shared archive: both episodes live, both chains loadable."""
    code = (
        "import json, sys\n"
        "from causalcache_memory.archive import open_archive\n"
        "from causalcache_memory.trace.store import TraceStore\n"
        "a = open_archive('s3://causalcache/fleet')\n"
        "heads = json.loads(sys.argv[1])\n"
        "print(json.dumps({'live': a.live_episodes(), 'lens': {e: len(TraceStore(a).load_trace(h)) "
        "for e, h in heads.items()}}))\n"
    )
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "local",
        "AWS_SECRET_ACCESS_KEY": "local",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}",
    }
    heads = {e: s["head"] for e, s in summaries.items()}
    run = subprocess.run(
        [sys.executable, "-c", code, json.dumps(heads)], env=env, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert {"agent-1", "agent-2"} <= set(seen["live"])
    assert seen["lens"] == {e: s["steps"] for e, s in summaries.items()}
