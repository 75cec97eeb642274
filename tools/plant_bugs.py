"""Plant each bug of the issue-19 table in a temporary copy of the tree and show the tests catch it.

    python tools/plant_bugs.py            # every bug, each against its tests (about two minutes)
    python tools/plant_bugs.py --list     # the table
    python tools/plant_bugs.py beam-tie   # one bug
    python tools/plant_bugs.py --suite    # each bug against the whole suite (slow)

For every bug: a fresh copy of the working tree (tools/_staging.py), one textual edit that must match
exactly once (a plant that no longer applies is reported, never silently skipped), then pytest on the
bug's tests in that copy. The unplanted copy must pass the same tests first. Exit status 0 only when the
baseline passes and every planted bug makes at least ``min_failed`` of its tests fail (issue 19's table:
one; issue 52's table: two, each named after the rule the bug breaks). Nothing is written into the checkout.
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
    min_failed: int = 1  # tests that must fail; above 1 the run goes on after the first failure to count


ISSUE19 = (
    Plant(
        "controller-size",
        "the controller refuses an allocation of the wrong size",
        "causalcache_memory/controller.py",
        r"checked = make_allocation\(\n\s+allocation\.selected,\n\s+t=trace\.t,\n\s+budget=self\.budget,\n"
        r"\s+allocator=self\.allocator\.name,\n\s+sizes=[^\n]*\n\s+\)\n"
        r"\s+allocation = replace\(allocation, selected=checked\.selected\)[^\n]*",
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

#: issue 52: the seven bugs that escaped the round-3 audit, each pinned by at least two named tests
ISSUE52 = (
    Plant(
        "guard-mask",
        "a state without screen text is judged by its mask pattern's threshold, not the full guard's",
        "causalcache_memory/selector/ood.py",
        r"return key, self\.masked_distance\(summary, key\), self\.mask_thresholds\[key\]",
        "return key, self.masked_distance(summary, key), self.threshold",
        ("tests/selector/test_guard_by_hand.py",),
        2,
    ),
    Plant(
        "text-jaccard",
        "text_current_jaccard is |a & b| / |a | b| (union without subtracting the intersection)",
        "causalcache_memory/selector/text_features.py",
        r"union = self\.words_n\[:n\] \+ current\.n_words - inter",
        "union = self.words_n[:n] + current.n_words",
        ("tests/selector/test_screen_text_rules.py", "tests/selector/test_feature_goldens.py"),
        2,
    ),
    Plant(
        "value-length",
        "two-character tokens holding a digit (12, B7) are value tokens (>= 2 -> > 2)",
        "causalcache_memory/selector/screen_text.py",
        r"if len\(tok\) >= 2 and any\(c\.isdigit\(\) for c in tok\):",
        "if len(tok) > 2 and any(c.isdigit() for c in tok):",
        ("tests/selector/test_screen_text_rules.py", "tests/selector/test_feature_goldens.py"),
        2,
    ),
    Plant(
        "fold-count",
        "fold_test_into_dev counts dev + test states against dev's need (only the test states)",
        "lab/causalcache_lab/learn/plan.py",
        r'plan\.states\["dev"\] \+ plan\.states\["test"\] < need_dev',
        'plan.states["test"] < need_dev',
        ("lab/tests/learn/test_plan_boundaries.py", "lab/tests/learn/test_plan.py"),
        2,
    ),
    Plant(
        "guard-order",
        "the guard's threshold is the order statistic with at most the stated rate above it (off by one)",
        "causalcache_memory/selector/ood.py",
        r"k = max\(math\.ceil\(\(1\.0 - false_alarm_rate\) \* len\(dist\)\) - 1, 0\)",
        "k = min(math.ceil((1.0 - false_alarm_rate) * len(dist)), len(dist) - 1)",
        ("tests/selector/test_guard_by_hand.py",),
        2,
    ),
    Plant(
        "keep-base-drop",
        "keep-base judges the team's states with the base model's drop_features zeroed (ignored)",
        "lab/causalcache_lab/selector/keep_base.py",
        r'drop = \[feature_index\(n\) for n in \(meta\.get\("train"\) or \{\}\)\.get\("drop_features", \(\)\)\]',
        "drop = []",
        ("lab/tests/selector/test_keep_base_boundaries.py",),
        2,
    ),
    Plant(
        "vision-key-grid",
        "the vision cache key holds the image grid (one content at two resolutions shared features)",
        "runtime/vision_cache.py",
        r"repr\(\(grid, str\(data\.dtype\), tuple\(data\.shape\)\)\)",
        "repr((str(data.dtype), tuple(data.shape)))",
        ("tests/runtime/test_vision_cache_key.py",),
        2,
    ),
)
PLANTS = ISSUE19 + ISSUE52


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


def run_tests(
    root: Path, tests: tuple[str, ...], *, first_failure: bool = True
) -> tuple[int, str, int, list[str]]:
    """``(exit code, pytest's closing line, failed tests, their ids)``; ``first_failure``: stop at the
    first (-x)."""
    cmd = [sys.executable, "-m", "pytest", "-q", "-rf", *(["-x"] if first_failure else [])]
    cmd += ["-p", "no:cacheprovider"]
    proc = subprocess.run([*cmd, *tests], cwd=root, env=env_for(root), capture_output=True, text=True)
    lines = [ln for ln in proc.stdout.splitlines() if ln.strip()]
    tail = lines[-1] if lines else proc.stderr.strip()[-200:]
    found = re.search(r"(\d+) failed", tail)
    ids = [ln[len("FAILED ") :].split(" - ")[0] for ln in lines if ln.startswith("FAILED ")]
    return proc.returncode, tail, int(found.group(1)) if found else 0, ids


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="plants to run (default: all)")
    parser.add_argument("--list", action="store_true", help="print the table and exit")
    parser.add_argument("--suite", action="store_true", help="run the whole tests/ directory per plant")
    parser.add_argument("--show-failed", action="store_true", help="print the id of every failed test")
    args = parser.parse_args(argv)
    if args.list:
        for p in PLANTS:
            print(f"{p.name:16} {p.path:46} {p.invariant}")
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
        rc, tail, _, _ = run_tests(base, ("tests",) if args.suite else every)
        print(f"{'baseline':16} {'pass' if rc == 0 else 'FAIL':8} {tail}")
        if rc != 0:
            return 1
        for p in chosen:
            root = stage(Path(tmp) / p.name)
            apply(p, root)
            rc, tail, failed, ids = run_tests(
                root, ("tests",) if args.suite else p.tests, first_failure=p.min_failed < 2
            )
            caught = rc == 1 and failed >= p.min_failed
            failures += not caught
            print(f"{p.name:16} {'caught' if caught else 'MISSED':8} {tail}")
            if args.show_failed:
                print("".join(f"    {i}\n" for i in ids), end="", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
