"""``causalcache archive check [--repair]`` and ``causalcache archive gc`` (retention users can run)."""

from __future__ import annotations

import json
import os
import time

from reliability_helpers import screenshot, write_raw

from causalcache_memory.archive import LocalArchive
from causalcache_memory.cli.main import main


def test_check_reports_then_repairs_a_corrupt_blob(tmp_path, capsys):
    archive = LocalArchive(tmp_path)
    good, bad = archive.put(screenshot(1)).sha256, archive.put(screenshot(2)).sha256
    archive.retain("ep", [good, bad, "c" * 64])
    write_raw(archive, bad, b"torn")
    assert main(["archive", "check", str(tmp_path), "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["corrupt"] == [f"blob {bad}"] and report["objects"] == 2
    assert report["dangling"] == [f"ep {'c' * 64}"]
    assert main(["archive", "check", str(tmp_path), "--repair"]) == 0
    assert "deleted" in capsys.readouterr().out
    assert bad not in archive and archive.get_bytes(good) == screenshot(1)
    archive.put(screenshot(2))  # the next put of the same bytes stores it again
    assert main(["archive", "check", str(tmp_path)]) == 0


def test_gc_releases_idle_episodes_and_collects(tmp_path, capsys):
    archive = LocalArchive(tmp_path)
    old, new = archive.put(screenshot(3)).sha256, archive.put(screenshot(4)).sha256
    archive.retain("idle", [old])
    archive.retain("busy", [new])
    past = time.time() - 3 * 86400
    os.utime(tmp_path / "refs" / "idle", (past, past))
    for sha in (old, new):
        os.utime(tmp_path / "blobs" / sha[:2] / sha, (past, past))
    args = ["archive", "gc", str(tmp_path), "--release-idle", "86400", "--grace-seconds", "3600", "--json"]
    assert main([*args, "--dry-run"]) == 0
    assert json.loads(capsys.readouterr().out)["released_episodes"] == ["idle"]
    assert archive.live_episodes() == ["busy", "idle"] and old in archive
    assert main(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["released_episodes"] == ["idle"] and out["deleted"] == 1 and out["kept"] == 1
    assert old not in archive and archive.get_bytes(new) == screenshot(4)


def test_archive_from_config(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"archive:\n  url: {tmp_path / 'arch'}\n")
    LocalArchive(tmp_path / "arch").put(screenshot(5))
    assert main(["archive", "check", "--config", str(cfg)]) == 0
    assert "1 objects checked, 0 corrupt" in capsys.readouterr().out
