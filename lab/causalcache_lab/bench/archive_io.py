"""Scenario: screenshot-archive write/read throughput and size, local directory and fsspec memory.

``count`` distinct 1920x1080 PNGs are written with ``put`` and read back with ``get_bytes`` (which
re-hashes every blob). Two baselines are measured in the same run to show where the time goes:

* ``raw_write_mb_s`` (local only): the same bytes written with plain ``open/write/fsync``, i.e. what the
  disk allows; ``write_vs_raw`` is the archive's share of that;
* ``reencode_ms_per_item``: decoding and re-encoding one screenshot as PNG with Pillow, which the archive
  never does; ``stored_equals_input`` checks that every stored blob has exactly the input's size and a
  sample reads back byte-identical.
"""

from __future__ import annotations

import io
import os
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from causalcache_lab.bench.screens import screenshot_pool, unique_variant
from causalcache_lab.bench.stats import owns_workdir

__all__ = ["BACKENDS", "run_archive_io"]

BACKENDS = ("local", "memory")
_MB = 1024.0 * 1024.0


def _dir_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _raw_write(items: Sequence[bytes], root: Path) -> float:
    root.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    for i, data in enumerate(items):
        with open(root / f"{i}.png", "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
    return time.perf_counter() - start


def _reencode_ms(items: Sequence[bytes], n: int = 3) -> float:
    from PIL import Image

    start = time.perf_counter()
    for data in items[:n]:
        with Image.open(io.BytesIO(data)) as image:
            image.save(io.BytesIO(), format="PNG")
    return (time.perf_counter() - start) * 1000.0 / min(n, len(items))


def _validate_hash_ms(items: Sequence[bytes], n: int = 20) -> dict[str, float]:
    from causalcache_memory.archive._keys import digest
    from causalcache_memory.archive.images import validate_image_bytes

    sample = items[:n]
    start = time.perf_counter()
    for data in sample:
        validate_image_bytes(data)
    mid = time.perf_counter()
    for data in sample:
        digest(data)
    end = time.perf_counter()
    return {
        "validate_ms_per_item": round((mid - start) * 1000.0 / len(sample), 3),
        "sha256_ms_per_item": round((end - mid) * 1000.0 / len(sample), 3),
    }


def _measure(archive: Any, items: Sequence[bytes]) -> dict[str, Any]:
    total = sum(map(len, items))
    start = time.perf_counter()
    hashes = [archive.put(data).sha256 for data in items]
    write_s = time.perf_counter() - start
    start = time.perf_counter()
    read = [archive.get_bytes(sha) for sha in hashes]
    read_s = time.perf_counter() - start
    return {
        "items": len(items),
        "input_mb": round(total / _MB, 2),
        "write_mb_s": round(total / _MB / write_s, 1),
        "read_mb_s": round(total / _MB / read_s, 1),
        "write_items_s": round(len(items) / write_s, 1),
        "read_items_s": round(len(items) / read_s, 1),
        "write_ms_per_item": round(write_s * 1000.0 / len(items), 3),
        "stored_equals_input": all(a == b for a, b in zip(read, items, strict=True)),
        "hashes": hashes,
    }


@owns_workdir
def run_archive_io(
    *,
    count: int = 1000,
    backends: Sequence[str] = BACKENDS,
    workdir: str | Path | None = None,
    keep: bool = False,
    screen: tuple[int, int] = (1920, 1080),
) -> dict[str, Any]:
    """``{"archive": {backend: {write_mb_s, read_mb_s, write_items_s, read_items_s, disk_mb, ...}}}``."""
    unknown = [b for b in backends if b not in BACKENDS]
    if unknown:
        raise ValueError(f"backends={unknown!r} are not benchmarked; choose from {list(BACKENDS)}")
    root = Path(workdir)  # type: ignore[arg-type]  # set by owns_workdir
    pool = screenshot_pool(6, tuple(screen))
    items = [unique_variant(pool[i % len(pool)], 10_000_000 + i) for i in range(count)]
    reencode = _reencode_ms(items)
    checks = _validate_hash_ms(items)
    out: dict[str, Any] = {}
    for backend in backends:
        if backend == "local":
            from causalcache_memory.archive import LocalArchive

            folder = root / f"archive-io-{uuid.uuid4().hex[:8]}"
            archive = LocalArchive(folder)
            result = _measure(archive, items)
            stored = [archive.size_bytes(h) for h in result["hashes"]]
            result["disk_mb"] = round(_dir_bytes(folder) / _MB, 2)
            raw_s = _raw_write(items, root / f"raw-{uuid.uuid4().hex[:8]}")
            result["raw_write_mb_s"] = round(sum(map(len, items)) / _MB / raw_s, 1)
            result["write_vs_raw"] = round(result["write_mb_s"] / result["raw_write_mb_s"], 3)
            if not keep:
                shutil.rmtree(folder, ignore_errors=True)
        else:
            from causalcache_memory.archive import FsspecArchive

            archive = FsspecArchive(f"memory://causalcache-bench/{uuid.uuid4().hex}")
            result = _measure(archive, items)
            stored = [archive.fs.size(archive._path(f"blobs/{h[:2]}/{h}")) for h in result["hashes"]]
            result["disk_mb"] = round(sum(stored) / _MB, 2)
            if not keep:
                archive.fs.rm(archive.root, recursive=True)
        result["stored_equals_input"] = result["stored_equals_input"] and stored == [len(b) for b in items]
        result["reencode_ms_per_item"] = round(reencode, 3)
        result.update(checks)
        del result["hashes"]
        out[backend] = result
    if not keep:
        for entry in root.glob("raw-*"):
            shutil.rmtree(entry, ignore_errors=True)
    return {"archive": out}
