"""Mutation testing of the modules that hold the method's invariants (cosmic-ray; ``make mutate``).

    pip install "cosmic-ray==8.7.0"                   # or: pip install -e ".[mutation]"
    python tools/mutate.py --jobs 16                  # every module in pyproject.toml
    python tools/mutate.py --jobs 2 --modules trace   # one module
    python tools/mutate.py --list
    python tools/mutate.py --jobs 2 --modules trace --rerun-survivors   # after adding tests

The module table lives in ``pyproject.toml`` under ``[[tool.causalcache.mutate.modules]]``: a name, the
file, the narrow test selection its mutants run against, and optionally the functions to mutate (line
ranges come from the current source, so they never go stale).

Mutants that cannot change behaviour by construction are marked skipped before the run (as cosmic-ray's
own filters do): mutants inside type annotations (every listed module has ``from __future__ import
annotations``, so annotations are never evaluated: ``str | None`` -> ``str + None`` is equivalent) or in
an ``if TYPE_CHECKING:`` block (imports made for annotations only), and
the operator replacements listed in ``exclude_operators`` (binary operators replaced by ``**``, shifts
or bitwise operators: a reduced, "selective" operator set; they are almost always killed trivially and
cost a third of the run).

How it runs: ``--jobs`` copies of the working tree (``tools/_staging.py``: a copy imports as the
installed package, so a mutant written into a copy's ``runtime/hgkv/gate.py`` is what its tests import
as ``causalcache_memory.runtime.hgkv.gate``), one cosmic-ray HTTP worker per copy, and per module one
cosmic-ray session (``init``, optional line filter, ``exec`` with the HTTP distributor) whose mutants go
to the free workers. Each module's tests must first pass unmutated (the baseline, timed; a mutant's
time limit is ``timeout_factor`` times that). The checkout is never written to.

``--deadline-s`` bounds the whole run: a module still running then is stopped, and its score is over
the mutants done (reported as partial, with the number left).

Output (``--out``, default ``mutation-out/``, ignored by git), rewritten after every module:
``summary.md`` and ``summary.json`` (per module: mutants, killed, survived, timeouts, score = killed /
(killed + survived)), one ``<module>.sqlite`` session per module (``cr-report``/``cr-html`` read it) and
``<module>-survivors.txt`` with the diff of every surviving mutant.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import tomllib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _staging import ROOT, env_for, stage


@dataclass(frozen=True)
class Module:
    name: str
    path: str
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()


def load_table(root: Path = ROOT) -> tuple[list[Module], dict]:
    data = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    cfg = data["tool"]["causalcache"]["mutate"]
    modules = [
        Module(m["name"], m["path"], tuple(m["tests"]), tuple(m.get("functions", ()))) for m in cfg["modules"]
    ]
    return modules, cfg


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """``((row, col), (end_row, end_col))`` of every annotation (arguments, returns, annotated names)."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        found: list[ast.expr | None] = []
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            found.append(node.returns)
            found += [
                arg.annotation for arg in (*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg) if arg
            ]
        elif isinstance(node, ast.AnnAssign):
            found.append(node.annotation)
        for ann in found:
            if ann is not None:
                spans.append(
                    ((ann.lineno, ann.col_offset), (ann.end_lineno or ann.lineno, ann.end_col_offset or 0))
                )
    return spans


def type_checking_lines(source: str) -> list[tuple[int, int]]:
    """Line ranges of ``if TYPE_CHECKING:`` blocks (imports made for annotations only)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        test = getattr(node, "test", None)
        name = getattr(test, "id", None) or getattr(test, "attr", None)
        if isinstance(node, ast.If) and name == "TYPE_CHECKING" and not node.orelse:
            out.append((node.lineno, node.end_lineno or node.lineno))
    return out


def skip_filtered(session: Path, source: str, functions: tuple[str, ...], exclude: list[str]) -> int:
    """Mark as skipped the mutants in annotations, outside ``functions`` (if given) or made by an
    excluded operator; returns how many."""
    spans = annotation_spans(source)
    typing_only = type_checking_lines(source)
    ranges = function_lines(source, functions) if functions else []
    patterns = [re.compile(p) for p in exclude]
    con = sqlite3.connect(session)
    rows = con.execute(
        "SELECT m.job_id, m.operator_name, m.start_pos_row, m.start_pos_col FROM mutation_specs m "
        "WHERE m.job_id NOT IN (SELECT job_id FROM work_results)"
    ).fetchall()
    skipped = []
    for job_id, operator, row, col in rows:
        why = None
        if any(a <= (row, col) < b for a, b in spans):
            why = "type annotation (never evaluated)"
        elif any(a <= row <= b for a, b in typing_only):
            why = "if TYPE_CHECKING block (imports for annotations only)"
        elif ranges and not any(a <= row <= b for a, b in ranges):
            why = "outside the listed functions"
        elif any(p.search(operator) for p in patterns):
            why = "excluded operator"
        if why:
            skipped.append((job_id, f"filtered: {why}"))
    con.executemany(
        "INSERT INTO work_results (worker_outcome, output, test_outcome, diff, job_id) "
        "VALUES ('SKIPPED', ?, NULL, NULL, ?)",
        [(why, job_id) for job_id, why in skipped],
    )
    con.commit()
    con.close()
    return len(skipped)


def function_lines(source: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """1-based inclusive line ranges of every function or method called one of ``names``."""
    ranges = []
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            ranges.append((node.lineno, node.end_lineno or node.lineno))
            found.add(node.name)
    missing = set(names) - found
    if missing:
        raise SystemExit(
            f"functions {sorted(missing)} not found; update [tool.causalcache.mutate] in pyproject"
        )
    return sorted(ranges)


def find_tool(name: str, explicit: str | None) -> str:
    """``explicit``, else on PATH, else next to this interpreter or in the user scripts folder."""
    import sysconfig

    if explicit:
        path = Path(explicit)
        candidate = path if path.name == name else path.with_name(name)
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    for folder in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts", f"{os.name}_user"))):
        if (folder / name).exists():
            return str(folder / name)
    raise SystemExit(f"{name} not found: pip install 'cosmic-ray==8.7.0' (or pass --cosmic-ray PATH)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, proc: subprocess.Popen, limit_s: float = 60.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            time.sleep(0.2)
    return False


class Workers:
    """``n`` cosmic-ray HTTP workers, each in its own staged copy of the tree."""

    def __init__(self, cosmic_ray: str, base: Path, n: int, log_dir: Path) -> None:
        self.procs: list[subprocess.Popen] = []
        self.urls: list[str] = []
        self.copies: list[Path] = []
        for i in range(n):
            copy = stage(base / f"worker-{i}")
            self.copies.append(copy)
            for _attempt in range(5):  # a port taken between free_port() and the bind: try another
                port = free_port()
                log = open(log_dir / f"worker-{i}.log", "ab")
                proc = subprocess.Popen(
                    [cosmic_ray, "http-worker", "--port", str(port)],
                    cwd=copy,
                    env=env_for(copy),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
                if wait_for_port(port, proc):
                    self.procs.append(proc)
                    self.urls.append(f"http://127.0.0.1:{port}")
                    break
                proc.kill()
                proc.wait()
            else:
                self.close()
                raise SystemExit(f"cosmic-ray http-worker {i} did not start; see {log_dir}/worker-{i}.log")

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_command(module: Module) -> str:
    # langsmith's pytest plugin (a langchain dependency) is half of a small selection's start-up time
    cmd = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:langsmith_plugin"]
    return " ".join([*cmd, *module.tests])


def baseline(module: Module, copy: Path) -> tuple[bool, float, str]:
    start = time.perf_counter()
    proc = subprocess.run(
        test_command(module).split(), cwd=copy, env=env_for(copy), capture_output=True, text=True
    )
    tail = "\n".join(proc.stdout.splitlines()[-15:])
    return proc.returncode == 0, time.perf_counter() - start, tail


def write_config(path: Path, module: Module, timeout: float, urls: list[str]) -> None:
    text = [
        "[cosmic-ray]",
        f"module-path = {json.dumps(module.path)}",
        f"timeout = {timeout:.1f}",
        "excluded-modules = []",
        f"test-command = {json.dumps(test_command(module))}",
        "",
        "[cosmic-ray.distributor]",
        'name = "http"',
        "",
        "[cosmic-ray.distributor.http]",
        f"worker-urls = {json.dumps(urls)}",
        "",
    ]
    path.write_text("\n".join(text), encoding="utf-8")


def results(session: Path) -> dict:
    """Counts and survivors straight from the session database (skipped jobs are not mutants here)."""
    con = sqlite3.connect(session)
    rows = con.execute(
        "SELECT r.worker_outcome, r.test_outcome, r.output, r.diff, m.operator_name, m.start_pos_row "
        "FROM work_results r JOIN mutation_specs m ON m.job_id = r.job_id"
    ).fetchall()
    pending = con.execute("SELECT COUNT(*) FROM work_items").fetchone()[0] - len(rows)
    con.close()
    out = {"mutants": 0, "killed": 0, "survived": 0, "timeouts": 0, "incompetent": 0, "pending": pending}
    survivors = []
    for worker, test, output, diff, operator, line in rows:
        worker, test = str(worker).lower(), str(test).lower() if test else ""
        if worker == "skipped":
            continue
        out["mutants"] += 1
        if test == "survived":
            out["survived"] += 1
            survivors.append({"operator": operator, "line": line, "diff": diff or ""})
        else:
            out["killed"] += 1
            # cosmic-ray marks a kill by its time limit with the output "timeout"
            out["timeouts"] += (output or "").strip() == "timeout"
            out["incompetent"] += test == "incompetent"
    done = out["killed"] + out["survived"]
    out["score"] = round(100.0 * out["killed"] / done, 1) if done else None
    out["survivors"] = sorted(survivors, key=lambda s: (s["line"], s["operator"]))
    return out


def run_module(
    module: Module,
    args,
    cfg: dict,
    tool: str,
    workers: Workers,
    out: Path,
    deadline: float,
    base: tuple[bool, float, str],
) -> dict:
    ok, seconds, tail = base
    if not ok:
        return {"error": f"baseline failed (tests do not pass unmutated):\n{tail}"}
    timeout = max(args.min_timeout, args.timeout_factor * seconds)
    config = out / f"{module.name}.toml"
    session = out / f"{module.name}.sqlite"
    stamp = out / f"{module.name}.source-sha256"
    cwd = workers.copies[0]  # init reads the module from a pristine copy (relative module-path)
    source = (cwd / module.path).read_text(encoding="utf-8")
    digest = hashlib.sha256(source.encode()).hexdigest()
    rerun = args.rerun_survivors and session.is_file() and stamp.is_file()
    if rerun and stamp.read_text().strip() != digest:
        return {
            "error": f"{module.path} changed since {session.name} was made: run without --rerun-survivors"
        }
    write_config(config, module, timeout, workers.urls)
    start = time.perf_counter()
    partial = False
    with open(out / f"{module.name}.log", "a" if rerun else "w", encoding="utf-8") as fh:
        if rerun:  # the survivors become pending again: only they run, against today's tests
            con = sqlite3.connect(session)
            con.execute("DELETE FROM work_results WHERE lower(test_outcome) = 'survived'")
            con.commit()
            con.close()
            skip_filtered(session, source, module.functions, list(cfg.get("exclude_operators", [])))
        else:
            session.unlink(missing_ok=True)
            subprocess.run(
                [tool, "init", str(config), str(session)], cwd=cwd, check=True, stdout=fh, stderr=fh
            )
            skip_filtered(session, source, module.functions, list(cfg.get("exclude_operators", [])))
            stamp.write_text(digest + "\n", encoding="utf-8")
        proc = subprocess.Popen(
            [tool, "exec", str(config), str(session)], cwd=cwd, stdout=fh, stderr=fh, start_new_session=True
        )
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            partial = True  # out of time: keep what is done, the rest stays pending
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
        except BaseException:  # stopped (SIGTERM, Ctrl-C): cosmic-ray's own session goes with it
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait()
            raise
    if proc.returncode not in (0, None) and not partial:
        return {"error": f"cosmic-ray exec exited with {proc.returncode}; see {module.name}.log"}
    summary = results(session)
    summary.update(
        baseline_s=round(seconds, 2),
        timeout_s=round(timeout, 1),
        wall_s=round(time.perf_counter() - start, 1),
        partial=partial or summary["pending"] > 0,
    )
    with open(out / f"{module.name}-survivors.txt", "w", encoding="utf-8") as fh:
        for s in summary["survivors"]:
            fh.write(f"--- line {s['line']} ({s['operator']})\n{s['diff']}\n")
    return summary


def write_summary(out: Path, table: dict[str, dict], modules: list[Module], jobs: int, wall: float) -> str:
    lines = [
        f"Mutation testing (cosmic-ray 8.7.0), {jobs} workers, {wall:.0f} s wall, "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, Python {sys.version.split()[0]}",
        "",
        "| module | file (functions) | mutants run | killed | survived | timeouts | not run | score |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total_k = total_s = 0
    for m in modules:
        where = f"`{m.path}`" + (f" ({', '.join(m.functions)})" if m.functions else "")
        r = table.get(m.name)
        if r is None:
            lines.append(f"| {m.name} | {where} | not started (deadline) | | | | | |")
            continue
        if "error" in r:
            lines.append(f"| {m.name} | {where} | {r['error'].splitlines()[0]} | | | | | |")
            continue
        total_k += r["killed"]
        total_s += r["survived"]
        score = "n/a" if r["score"] is None else f"{r['score']:.1f}%"
        lines.append(
            f"| {m.name} | {where} | {r['mutants']} | {r['killed']} | {r['survived']} | {r['timeouts']} "
            f"| {r['pending']} | {score}{' (partial)' if r.get('partial') else ''} |"
        )
    if total_k + total_s:
        lines.append(
            f"| **all** | | {total_k + total_s} | {total_k} | {total_s} | | | "
            f"**{100.0 * total_k / (total_k + total_s):.1f}%** |"
        )
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text, encoding="utf-8")
    (out / "summary.json").write_text(json.dumps(table, indent=1, default=str), encoding="utf-8")
    return text


def _stop(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    modules, cfg = load_table()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel workers (copies)")
    parser.add_argument("--modules", default="", help="comma-separated module names (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "mutation-out", help="output directory")
    parser.add_argument(
        "--cosmic-ray",
        dest="cosmic_ray",
        default=os.environ.get("COSMIC_RAY"),
        help="path of the cosmic-ray executable (default: on PATH)",
    )
    parser.add_argument("--deadline-s", type=float, default=None, help="stop the whole run after this long")
    parser.add_argument("--timeout-factor", type=float, default=float(cfg.get("timeout_factor", 10.0)))
    parser.add_argument("--min-timeout", type=float, default=float(cfg.get("min_timeout_s", 30.0)))
    parser.add_argument(
        "--rerun-survivors",
        action="store_true",
        help="re-run only the surviving mutants of the sessions in --out (after adding tests)",
    )
    parser.add_argument("--list", action="store_true", help="print the module table and exit")
    args = parser.parse_args(argv)
    if args.list:
        for m in modules:
            print(f"{m.name:20} {m.path:40} {' '.join(m.tests)}")
        return 0
    wanted = [n for n in args.modules.split(",") if n]
    unknown = set(wanted) - {m.name for m in modules}
    if unknown:
        parser.error(f"unknown modules {sorted(unknown)}; known: {[m.name for m in modules]}")
    chosen = [m for m in modules if not wanted or m.name in wanted]
    # the workers and cosmic-ray's exec run in sessions of their own (a kill of this process group does not
    # reach them): on SIGTERM unwind through the ``finally`` blocks that stop them
    signal.signal(signal.SIGTERM, _stop)
    tool = find_tool("cosmic-ray", args.cosmic_ray)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    deadline = time.monotonic() + (args.deadline_s if args.deadline_s else 10**9)
    table: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="causalcache-mutate-") as tmp:
        workers = Workers(tool, Path(tmp), max(1, args.jobs), out)
        try:
            # every module's unmutated tests at once, one per copy (timed under the same parallel load)
            with ThreadPoolExecutor(len(workers.copies)) as pool:
                jobs = {
                    m.name: pool.submit(baseline, m, workers.copies[i % len(workers.copies)])
                    for i, m in enumerate(chosen)
                }
                baselines = {name: job.result() for name, job in jobs.items()}
            for m in chosen:
                if time.monotonic() >= deadline - 5:
                    break
                print(f"[mutate] {m.name}: {m.path}", flush=True)
                table[m.name] = r = run_module(m, args, cfg, tool, workers, out, deadline, baselines[m.name])
                if "error" in r:
                    print(f"[mutate] {m.name}: {r['error']}", flush=True)
                else:
                    print(
                        f"[mutate] {m.name}: {r['mutants']} mutants run, {r['survived']} survived, "
                        f"score {r['score']}%, {r['pending']} not run, {r['wall_s']} s",
                        flush=True,
                    )
                write_summary(out, table, chosen, args.jobs, time.perf_counter() - start)
        finally:
            workers.close()
    print(write_summary(out, table, chosen, args.jobs, time.perf_counter() - start))
    return 1 if any("error" in r for r in table.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
