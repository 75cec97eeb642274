"""Labelling throughput against 1, 2 and 4 fake SGLang workers behind smg (BENCHMARKS.md, scale-out).

    python lab/tests/scaleout/bench_fleet.py label --workers 1,2,4 --concurrency 16 --latency-ms 20
    python lab/tests/scaleout/bench_fleet.py archive --steps 30       # per-step archive cost on moto S3

``label``: each fake worker is its own process serving one request at a time after ``--latency-ms`` (a
stand-in for a GPU-bound server: it uses no CPU while "computing"); the labeller runs
:func:`run_labelling_fleet` through the gateway on expert demonstrations of the synthetic world.
``archive``: a simulated agent step's archive work (put a new 1920x1080 PNG, retain it, put and retain a
trace record, read the B + 1 = 5 prompt images twice) on moto's S3 server, with and without the
write-through cache.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scaleout_support import Gateway, MotoS3, SGLangLoopback


class _SlowWorker(SGLangLoopback):
    """One request at a time, each taking ``latency_s`` more (no CPU while waiting)."""

    def __init__(self, latency_s: float, **kwargs) -> None:
        super().__init__(**kwargs)
        self.latency_s = latency_s
        self._busy = threading.Lock()
        self.served = 0

    def handle(self, path, payload):
        with self._busy:
            self.served += 1
            time.sleep(self.latency_s)
            return super().handle(path, payload)

    def record(self, path, payload, headers):  # keep memory flat in long runs
        pass


def _serve(latency_s: float, conn) -> None:
    worker = _SlowWorker(latency_s, lifetime_s=1800).start()
    conn.send(worker.url)
    conn.recv()  # until the parent says stop
    worker.stop()
    conn.send(worker.served)


def bench_label(n_workers: int, concurrency: int, latency_ms: float, tasks: int, archive_dir: str) -> dict:
    from causalcache_lab.selector.label_fleet import run_labelling_fleet
    from causalcache_lab.selector.labels import LabelConfig
    from causalcache_lab.world.expert import generate_demonstrations
    from causalcache_lab.world.tasks import generate_tasks
    from causalcache_memory.archive import LocalArchive
    from causalcache_memory.runtime.sglang_client import SGLangPolicy

    archive = LocalArchive(archive_dir)
    trajectories = generate_demonstrations(generate_tasks(tasks, seed=11), archive)
    ctx = multiprocessing.get_context("spawn")
    pipes, procs, urls = [], [], []
    for _ in range(n_workers):
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_serve, args=(latency_ms / 1000.0, child), daemon=True)
        proc.start()
        pipes.append(parent)
        procs.append(proc)
        urls.append(parent.recv())
    config = LabelConfig(budgets=(2,), path_length=1, path_candidates=2, max_states_per_trajectory=3)
    try:
        with Gateway(urls, lifetime_s=1800) as gw, SGLangPolicy(gw.url, gateway=True, model_name="fake") as p:
            with tempfile.TemporaryDirectory() as tmp:
                counts = run_labelling_fleet(
                    p,
                    archive,
                    trajectories,
                    Path(tmp) / "labels.jsonl",
                    config,
                    concurrency=concurrency,
                    progress=False,
                )
    finally:
        for pipe in pipes:
            pipe.send("stop")
        served = [pipe.recv() for pipe in pipes]
        for proc in procs:
            proc.join(10)
    counts.pop("errors")
    rps = round(sum(served) / counts["seconds"], 1)
    return {"workers": n_workers, **counts, "requests": served, "requests_per_s": rps}


def bench_archive(steps: int) -> dict:
    from causalcache_lab.bench.screens import screenshot_pool, unique_variant
    from causalcache_memory.archive import open_archive

    pool = screenshot_pool(4, (1920, 1080))
    out = {}
    with MotoS3() as s3, s3.environ(), tempfile.TemporaryDirectory() as tmp:
        for name, kwargs in (("s3", {}), ("s3+cache", {"cache_dir": os.path.join(tmp, "cache")})):
            archive = open_archive(f"s3://{s3.bucket}/{name.replace('+', '-')}", **kwargs)
            hashes, put_ms, read_ms = [], [], []
            for step in range(steps):
                t0 = time.perf_counter()
                sha = archive.put(unique_variant(pool[step % 4], step)).sha256
                archive.retain("bench", [sha])
                rec = archive.put_record(json.dumps({"step": step, "sha": sha}).encode())
                archive.retain("bench", [rec])
                t1 = time.perf_counter()
                hashes.append(sha)
                for _ in range(2):  # pass 1 and pass 2 prompts: B + 1 = 5 images each
                    for h in hashes[-5:]:
                        archive.get_bytes(h)
                t2 = time.perf_counter()
                put_ms.append(1000 * (t1 - t0))
                read_ms.append(1000 * (t2 - t1))
            w = slice(5, None)  # after warm-up
            out[name] = {
                "write_ms": round(sum(put_ms[w]) / len(put_ms[w]), 1),
                "read_ms": round(sum(read_ms[w]) / len(read_ms[w]), 1),
                "png_kb": round(len(pool[0]) / 1024),
            }
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=("label", "archive"))
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json")
    args = parser.parse_args()
    if args.what == "label":
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for n in (int(x) for x in args.workers.split(",")):
                rows.append(bench_label(n, args.concurrency, args.latency_ms, args.tasks, tmp))
                print(json.dumps(rows[-1]), flush=True)
        base = rows[0]["states_per_s"]
        result = {"label": rows, "ratio": [round(r["states_per_s"] / base, 2) for r in rows]}
    else:
        result = {"archive": bench_archive(args.steps)}
    result["command"] = "python lab/tests/scaleout/bench_fleet.py " + " ".join(sys.argv[1:])
    result["cpus"] = os.cpu_count()
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
