"""The kill -9 campaign shared by the crash tests (and runnable alone for larger figures).

``run_archive_campaign`` starts writer processes (``crash_writer.py``), kills one with SIGKILL at a random
moment after it acknowledged at least one write, releases that writer's episode, runs ``gc`` (short grace)
concurrently in this process, restarts the writer with a new log (a *generation*) and keeps reading
acknowledged objects back. At the end every write acknowledged by a writer's last generation must be
readable and intact (released generations may legitimately be collected); no read may ever return a
torn object. ``run_trace_campaign`` does the same for trace-store commits (every acknowledged head must
load with all its steps).

``python tests/reliability/crash_campaign.py --kills 40`` prints the figures quoted in docs/RELIABILITY.md.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
WRITER = HERE / "crash_writer.py"
sys.path.insert(0, str(HERE))


@dataclass
class Figures:
    backend: str
    kills: int = 0
    acknowledged: int = 0
    verified_at_end: int = 0
    reads: int = 0
    lost: int = 0
    torn_reads: int = 0
    gc_deleted: int = 0
    temp_files_left: int = 0
    problems: list[str] = field(default_factory=list)


def _read_log(path: Path) -> list[tuple[int, str]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        parts = line.split()
        if len(parts) == 2 and len(parts[1]) == 64 and parts[0].isdigit():
            out.append((int(parts[0]), parts[1]))
    return out


class _Writer:
    def __init__(self, kind: str, target: str, index: int, folder: Path) -> None:
        self.kind, self.target, self.index, self.folder = kind, target, index, folder
        self.generation = -1
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def log(self) -> Path:
        name = f"w{self.index}" if self.kind == "trace" else f"w{self.index}-g{self.generation}"
        return self.folder / f"{name}.log"

    def start(self) -> None:
        self.generation += 1
        seed = 1000 * self.index + self.generation
        args = [
            sys.executable,
            str(WRITER),
            self.kind,
            self.target,
            str(self.index),
            str(seed),
            str(self.log),
        ]
        with open(self.folder / "stderr.txt", "ab") as err:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)

    def wait_for_ack(self, before: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while len(_read_log(self.log)) <= before:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"writer {self.index} exited: {(self.folder / 'stderr.txt').read_text()[-2000:]}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"writer {self.index} acknowledged nothing in {timeout} s")
            time.sleep(0.02)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()


def _verify(archive, expected: dict[str, int], figures: Figures, *, must_exist: bool) -> None:
    from reliability_helpers import screenshot

    from causalcache_memory.errors import BlobCorruptError, BlobNotFoundError

    for sha, i in expected.items():
        figures.reads += 1
        try:
            data = archive.get_bytes(sha)
        except BlobCorruptError:
            figures.torn_reads += 1
            continue
        except BlobNotFoundError:
            if must_exist:
                figures.lost += 1
                figures.problems.append(f"lost {sha} (id {i})")
            continue
        if data != screenshot(i, size=(48 + i % 16, 32)):
            figures.torn_reads += 1


def run_archive_campaign(
    target: str, folder: Path, *, kills: int, writers: int = 3, seed: int = 7
) -> Figures:
    from causalcache_memory.archive import check_archive, open_archive

    rng = random.Random(seed)
    archive = open_archive(target)
    figures = Figures(backend="fsspec " + target.split("://")[0] if "://" in target else "local")
    pool = [_Writer("archive", target, w, folder) for w in range(writers)]
    stop = threading.Event()

    def collect() -> None:  # gc concurrently with the writers, short grace
        while not stop.is_set():
            figures.gc_deleted += open_archive(target).gc(grace_seconds=0.5).deleted
            time.sleep(0.05)

    collector = threading.Thread(target=collect, daemon=True)
    collector.start()
    try:
        for w in pool:
            w.wait_for_ack(0)
        while figures.kills < kills:
            w = pool[rng.randrange(writers)]
            w.wait_for_ack(0)
            time.sleep(rng.uniform(0.02, 0.25))
            w.kill()
            figures.kills += 1
            sample = dict(rng.sample(_read_log(w.log), min(20, len(_read_log(w.log)))))
            _verify(archive, {sha: i for i, sha in sample.items()}, figures, must_exist=True)
            archive.release(f"writer-{w.index}")  # its objects become collectable ...
            w.start()  # ... while the next generation re-puts many of them
        for w in pool:  # every writer's last generation acknowledges some writes before the end
            w.wait_for_ack(5)
    finally:
        for w in pool:
            w.kill()
        figures.kills += len(pool)
        stop.set()
        collector.join(30)
    all_logs = sorted(folder.glob("w*-g*.log"))
    figures.acknowledged = sum(len(_read_log(p)) for p in all_logs)
    last = {}
    for w in pool:
        last.update({sha: i for i, sha in _read_log(w.log)})
    _verify(archive, last, figures, must_exist=True)
    figures.verified_at_end = len(last)
    released = {sha: i for p in all_logs for i, sha in _read_log(p)}
    _verify(archive, {s: i for s, i in released.items() if s not in last}, figures, must_exist=False)
    report = check_archive(open_archive(target), repair=True)
    figures.temp_files_left = report.temp_files
    if report.corrupt:
        figures.problems.append(f"corrupt objects: {report.corrupt}")
    return figures


def run_trace_campaign(target: str, folder: Path, *, kills: int, writers: int = 2, seed: int = 11) -> Figures:
    from causalcache_memory.archive import open_archive
    from causalcache_memory.trace.store import TraceStore

    rng = random.Random(seed)
    figures = Figures(backend="trace-store")
    pool = [_Writer("trace", target, w, folder) for w in range(writers)]
    try:
        for w in pool:
            w.wait_for_ack(0)
        while figures.kills < kills:
            w = pool[rng.randrange(writers)]
            w.wait_for_ack(len(_read_log(w.log)))
            time.sleep(rng.uniform(0.02, 0.2))
            w.kill()
            figures.kills += 1
            w.start()
    finally:
        for w in pool:
            w.kill()
        figures.kills += len(pool)
    store = TraceStore(open_archive(target))
    for w in pool:
        acks = _read_log(w.log)
        figures.acknowledged += len(acks)
        for steps, head in acks:
            figures.reads += 1
            try:
                trace = store.load_trace(head, episode_id=f"w{w.index}")
            except Exception as exc:  # any failure to load an acknowledged head is a loss
                figures.lost += 1
                figures.problems.append(f"head {head}: {type(exc).__name__}: {exc}")
                continue
            if trace.t != steps or len(trace.events) != steps - 1:
                figures.torn_reads += 1
        figures.verified_at_end += len(acks)
    return figures


def main() -> None:  # pragma: no cover - manual runs for the figures in docs/RELIABILITY.md
    import argparse
    import tempfile

    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=40)
    args = parser.parse_args()
    out = []
    for name in ("local", "local-fsspec", "trace"):
        folder = Path(tempfile.mkdtemp(prefix=f"crash-{name}-"))
        target = str(folder / "archive") if name != "local-fsspec" else f"local://{folder}/archive"
        start = time.perf_counter()
        if name == "trace":
            figures = run_trace_campaign(target, folder, kills=args.kills)
        else:
            figures = run_archive_campaign(target, folder, kills=args.kills)
        out.append({**asdict(figures), "seconds": round(time.perf_counter() - start, 1)})
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
