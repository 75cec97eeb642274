"""The S3 GC race campaign: writers, retainers, a releaser and a collector in separate processes against a
loopback S3 server, with kill -9s (issue 27, finding 1).

Every process is a ``s3_gc_worker.py``. Writers put and retain (within half the grace), a retainer
re-retains objects other writers acknowledged (some of them released and being collected), a releaser
releases the episodes of killed writer generations, and a collector runs ``gc`` with a short grace the
whole time. The campaign kills a writer (mostly), the retainer or the releaser at random moments. When a
writer generation is killed, every object it acknowledged (put and retained) is checked *before* its
episode is released: its references still exist, so each must be there. At the end every object
acknowledged by a generation that was never released, and every object the retainers acknowledged, must
read back intact.

``python tests/reliability/s3_gc_campaign.py --kills 24 --grace 1 3`` prints the figures quoted in
docs/RELIABILITY.md (it starts its own moto server process).
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).parent
WORKER = HERE / "s3_gc_worker.py"
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # tests/moto_s3.py

from s3_gc_worker import acknowledged  # noqa: E402


@dataclass
class GCRaceFigures:
    grace: float
    kills: int = 0
    acknowledged: int = 0
    retained_late: int = 0
    refused: int = 0
    checked_at_kill: int = 0
    verified_at_end: int = 0
    lost: int = 0
    torn_reads: int = 0
    gc_runs: int = 0
    gc_deleted: int = 0
    released_episodes: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)


class _Proc:
    def __init__(self, role: str, index: int, url: str, folder: Path, grace: float, env: dict) -> None:
        self.role, self.index, self.url, self.folder, self.grace, self.env = (
            role,
            index,
            url,
            folder,
            grace,
            env,
        )
        self.generation = -1
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def episode(self) -> str:
        return f"{self.role[0]}{self.index}-g{self.generation}"

    @property
    def log(self) -> Path:
        return self.folder / f"{self.episode}.log"

    def start(self) -> None:
        self.generation += 1
        args = [sys.executable, str(WORKER), self.role, self.url, str(self.folder), str(self.index)]
        args += [str(self.generation), str(self.grace)]
        with open(self.folder / "stderr.txt", "ab") as err:
            self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err, env=self.env)

    def acks(self) -> int:
        return len(acknowledged(self.folder, self.log.name)) if self.role in ("writer", "retainer") else 1

    def wait_for_ack(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.acks() == 0:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.role} exited: {(self.folder / 'stderr.txt').read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.role} {self.index} acknowledged nothing in {timeout} s")
            time.sleep(0.02)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def _check(archive, acks: list[tuple[int, str]], figures: GCRaceFigures, what: str, read_all: bool) -> int:
    from reliability_helpers import screenshot

    from causalcache_memory.errors import BlobCorruptError, BlobNotFoundError

    unique = dict((sha, i) for i, sha in acks)
    for n, (sha, i) in enumerate(unique.items()):
        if not read_all and n % 5:
            if sha not in archive:
                figures.lost += 1
                figures.problems.append(f"{what}: lost {sha} (id {i})")
            continue
        try:
            data = archive.get_bytes(sha)
        except BlobNotFoundError:
            figures.lost += 1
            figures.problems.append(f"{what}: lost {sha} (id {i})")
            continue
        except BlobCorruptError:
            figures.torn_reads += 1
            continue
        if data != screenshot(i, size=(40 + i % 9, 24)):
            figures.torn_reads += 1
    return len(unique)


def _refusals(folder: Path) -> int:
    return sum(p.read_text().count("refused ") for p in folder.glob("*-g*.log"))


def run_s3_gc_campaign(
    url: str, env: dict[str, str], folder: Path, *, kills: int, grace: float, writers: int = 2, seed: int = 3
) -> GCRaceFigures:
    """Run the campaign against ``url`` (an ``s3://`` archive reachable with ``env``); see module doc."""
    from causalcache_memory.archive import open_archive

    rng = random.Random(seed)
    figures = GCRaceFigures(grace=grace)
    start = time.perf_counter()
    archive = open_archive(  # this process's view, named explicitly (fsspec caches filesystems by options)
        url,
        endpoint_url=env["AWS_ENDPOINT_URL"],
        key=env["AWS_ACCESS_KEY_ID"],
        secret=env["AWS_SECRET_ACCESS_KEY"],
        client_kwargs={"region_name": env["AWS_DEFAULT_REGION"]},
    )
    env = {**os.environ, **env}
    collector = _Proc("collector", 0, url, folder, grace, env)
    releaser = _Proc("releaser", 0, url, folder, grace, env)
    retainer = _Proc("retainer", 0, url, folder, grace, env)
    pool = [_Proc("writer", w, url, folder, grace, env) for w in range(writers)]
    everyone = [collector, releaser, retainer, *pool]
    try:
        for w in pool:
            w.wait_for_ack()
        while figures.kills < kills:
            roll = rng.random()
            victim = pool[rng.randrange(writers)] if roll < 0.7 else retainer if roll < 0.85 else releaser
            victim.wait_for_ack()
            time.sleep(rng.uniform(0.05, 0.4))
            victim.kill()
            figures.kills += 1
            if victim.role == "writer":  # its references still exist: every acknowledged object must too
                acks = acknowledged(folder, victim.log.name)
                figures.checked_at_kill += _check(archive, acks, figures, victim.episode, read_all=False)
                with open(folder / "release.txt", "a", encoding="utf-8") as fh:
                    fh.write(victim.episode + "\n")
                figures.released_episodes += 1
            victim.start()
        for w in pool:
            w.wait_for_ack()
    finally:
        for proc in everyone:
            proc.kill()
        figures.kills += len(everyone) - 1  # the collector is stopped too, not counted as a kill
    last = [(i, sha) for w in pool for i, sha in acknowledged(folder, w.log.name)]
    late = acknowledged(folder, "r*-g*.log")
    figures.verified_at_end = _check(archive, last + late, figures, "end", read_all=True)
    figures.acknowledged = len(acknowledged(folder, "w*-g*.log"))
    figures.retained_late = len(late)
    figures.refused = _refusals(folder)
    runs = (folder / "gc.log").read_text().split() if (folder / "gc.log").exists() else []
    figures.gc_runs, figures.gc_deleted = len(runs), sum(int(x) for x in runs if x.isdigit())
    figures.seconds = round(time.perf_counter() - start, 1)
    return figures


def main() -> None:  # pragma: no cover - manual runs for the figures in docs/RELIABILITY.md
    import argparse
    import tempfile

    from moto_s3 import MotoS3Process

    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=24)
    parser.add_argument("--grace", type=float, nargs="+", default=[1.0, 3.0])
    parser.add_argument("--writers", type=int, default=3)
    args = parser.parse_args()
    out = []
    with MotoS3Process() as server:
        for grace in args.grace:
            folder = Path(tempfile.mkdtemp(prefix=f"s3-gc-race-{grace:g}-"))
            url = f"s3://{server.bucket}/race-{grace:g}"
            figures = run_s3_gc_campaign(
                url, server.env, folder, kills=args.kills, grace=grace, writers=args.writers
            )
            out.append(asdict(figures) | {"problems": figures.problems[:10]})
            print(json.dumps(out[-1]), flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
