"""Plant each bug of the issue-19 table in a temporary copy of the tree and show the tests catch it.

    python tools/plant_bugs.py            # every bug, each against its tests (about a minute)
    python tools/plant_bugs.py --list     # the table
    python tools/plant_bugs.py beam-tie   # one bug
    python tools/plant_bugs.py --suite    # each bug against the whole suite (slow)

For every bug: a fresh copy of the working tree (tools/_staging.py), one textual edit that must match
exactly once (a plant that no longer applies is reported, never silently skipped), then pytest on the
bug's tests in that copy. The unplanted copy must pass the same tests first. Exit status 0 only when the
baseline passes and every planted bug makes a test fail. Nothing is written into the checkout.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _staging import env_for, stage


@dataclass(frozen=True)
class Plant:
    name: str
    invariant: str
    path: str
    pattern: str  # regular expression that must match exactly once
    replacement: str
    tests: tuple[str, ...]


PLANTS = (
    Plant(
        "controller-size",
        "the controller refuses an allocation of the wrong size",
        "causalcache_memory/controller.py",
        r"checked = make_allocation\(\n\s+allocation\.selected, t=trace\.t, budget=self\.budget, "
        r"allocator=self\.allocator\.name\n\s+\)\n\s+allocation = replace\(allocation, selected=checked\.selected\)[^\n]*",
        "pass",
        ("tests/invariants/test_inv_controller.py", "tests/core/test_controller.py"),
    ),
    Plant(
        "trace-append",
        "the trace is append-only, indices contiguous (!= -> >)",
        "causalcache_memory/trace/events.py",
        r"if event\.index != len\(self\._events\) \+ 1:",
        "if event.index > len(self._events) + 1:",
        ("tests/invariants/test_inv_trace.py", "tests/core/test_trace.py"),
    ),
    Plant(
        "chain-index",
        "a trace chain loaded from the archive has contiguous indices",
        "causalcache_memory/trace/chain.py",
        r"if event\.index != n_events \+ 1:(?=\s+raise TraceError\(\s+f\"trace record \{sha\} of episode "
        r"\{meta\['episode_id'\]!r\} holds event)",
        "if False:",
        ("tests/invariants/test_inv_trace.py", "tests/archive/test_trace_store.py"),
    ),
    Plant(
        "contrast-sign",
        "closed-loop contrasts have the right sign (treatment and control swapped)",
        "lab/causalcache_lab/eval/summary.py",
        r"(treat = task_scores\(\[o for o in outcomes if o\.arm == )arm( and .*\n\s+"
        r"ctrl = task_scores\(\[o for o in outcomes if o\.arm == )base",
        r"\1base\2arm",
        ("lab/tests/invariants/test_inv_eval_summary.py",),
    ),
    Plant(
        "split-filter",
        "per-split success is computed on the right split (filter inverted)",
        "lab/causalcache_lab/eval/summary.py",
        r"(def split_rows\(.*\n\s+return \[o for o in outcomes if split == \"all\" or o\.split )==( split\])",
        r"\1!=\2",
        ("lab/tests/invariants/test_inv_eval_summary.py",),
    ),
    Plant(
        "beam-tie",
        "the beam takes a swap only if it strictly beats the displaced event (> -> >=)",
        "causalcache_memory/selector/beam.py",
        r"top_gains > min_gain",
        "top_gains >= min_gain",
        ("tests/invariants/test_inv_beam.py", "tests/selector/test_selector_beam.py"),
    ),
    Plant(
        "record-hash",
        "record hashes are verified on read (blob-only verification), caught by the trace-store tests",
        "causalcache_memory/archive/_keys.py",
        r"if actual != sha256:",
        'if actual != sha256 and kind == "blob":',
        ("tests/archive/test_trace_store.py", "tests/invariants/test_inv_trace.py"),
    ),
)


def planted(plant: Plant, root: Path) -> str:
    """The text of ``plant.path`` under ``root`` with the bug planted (raises if it does not apply once)."""
    text = (root / plant.path).read_text(encoding="utf-8")
    new, n = re.subn(plant.pattern, plant.replacement, text)
    if n != 1:
        raise SystemExit(
            f"{plant.name}: pattern matched {n} times in {plant.path} (expected 1); update the table"
        )
    return new


def check_applies(plant: Plant, root: Path) -> None:
    planted(plant, root)


def apply(plant: Plant, root: Path) -> None:
    (root / plant.path).write_text(planted(plant, root), encoding="utf-8")


def run_tests(root: Path, tests: tuple[str, ...]) -> tuple[int, str]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *tests]
    proc = subprocess.run(cmd, cwd=root, env=env_for(root), capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    return proc.returncode, (lines[-1] if lines else proc.stderr.strip()[-200:])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="plants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    parser.add_argument("--suite", action="store_true", help="run the whole tests/ directory per plant")
    args = parser.parse_args(argv)
    if args.list:
        for p in PLANTS:
            print(f"{p.name:16} {p.path:42} {p.invariant}")
        return 0
    unknown = set(args.names) - {p.name for p in PLANTS}
    if unknown:
        parser.error(f"unknown plants {sorted(unknown)}; known: {[p.name for p in PLANTS]}")
    chosen = [p for p in PLANTS if not args.names or p.name in args.names]
    failures = 0
    with tempfile.TemporaryDirectory(prefix="causalcache-plant-") as tmp:
        base = stage(Path(tmp) / "baseline")
        for p in chosen:  # every plant must apply to today's code before anything runs
            check_applies(p, base)
        every = tuple(sorted({t for p in chosen for t in p.tests}))
        rc, tail = run_tests(base, ("tests",) if args.suite else every)
        print(f"{'baseline':16} {'pass' if rc == 0 else 'FAIL':8} {tail}")
        if rc != 0:
            return 1
        for p in chosen:
            root = stage(Path(tmp) / p.name)
            apply(p, root)
            rc, tail = run_tests(root, ("tests",) if args.suite else p.tests)
            caught = rc == 1
            failures += not caught
            print(f"{p.name:16} {'caught' if caught else 'MISSED':8} {tail}")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
