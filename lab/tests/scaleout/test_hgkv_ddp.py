"""HGKV DiD training under torchrun: 2 processes on gloo give the one-process result at the same global
batch (tiny model, CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from ddp_worker import CONFIG, setup  # noqa: E402

from causalcache_lab.hgkv.ddp import shard_bounds  # noqa: E402
from causalcache_lab.hgkv.train import train_did  # noqa: E402

WORKER = Path(__file__).with_name("ddp_worker.py")


def test_shard_bounds_cover_every_item_once():
    for n in range(0, 11):
        for world in (1, 2, 3, 4):
            covered = [i for r in range(world) for i in range(*shard_bounds(n, r, world))]
            assert covered == list(range(n))


@pytest.mark.slow  # ~50 s on a shared 2-core CPU (three model loads, torchrun); runs in CI
def test_two_gloo_processes_match_one_process(tmp_path):
    from causalcache_memory.runtime.tiny import build_tiny_qwen_vl

    model_dir = build_tiny_qwen_vl(tmp_path / "tiny", family="qwen2_5_vl")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    run = subprocess.run(
        [*cmd, str(WORKER), str(model_dir), str(tmp_path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ddp = torch.load(tmp_path / "ddp.pt")

    scorer, adapter, train, dev = setup(str(model_dir))
    before = {k: v.detach().clone() for k, v in adapter.state_dict().items()}
    result = train_did(scorer, adapter, train, dev, CONFIG)
    one = adapter.state_dict()
    assert set(one) == set(ddp["state"])
    assert any(not torch.equal(one[k], before[k]) for k in one)  # training moved the adapter
    for key, value in one.items():
        torch.testing.assert_close(ddp["state"][key], value, rtol=1e-4, atol=1e-6, msg=key)
    assert [h["step"] for h in ddp["history"]] == [h["step"] for h in result.history]
    for a, b in zip(ddp["history"], result.history, strict=True):
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-4, abs=1e-6)
        assert a["gates"] == b["gates"]
