"""RESULTS.md 9c: `causalcache learn` fine-tuning the bundled selector, chosen on dev-00, run on heldout-02.

One rerunnable command (every step is resumable: a recording, a learn stage or an evaluated arm already on
disk is reused; use a new ``--out`` after a code change that affects them, e.g. the threshold rule):

    python lab/tools/learn_warmstart.py --out runs/warmstart \\
        --heldout-records runs/ws_heldout02_600_record,runs/ws_heldout02_300_record,runs/ws_heldout02_200_record \\
        --recent /work/wt/learn2/runs/explore_heldout02/eval-recent/results.json \\
        [--bundled /work/wt/learn2/runs/explore_heldout02_600_v3/eval-bundled/results.json] \\
        [--scratch /work/wt/learn2/runs/explore_heldout02_600_v3]

1. **dev-00** (the choice of ``train.init_from``; the protocol of RESULTS 9b): record 300 episodes with
   ``allocation.explore: {share: 0.6, allocator: random}``, evaluate Recent-4 and the bundled selector on
   40 fresh tasks x 3 seeds, then ``learn`` (teacher-forced and agreement labels) with ``init_from:
   bundled`` (learn's fine-tuning lr 3e-4, and 3e-3 / 1e-3) and with ``init_from: null`` and evaluate
   each; task-paired contrasts.
2. **heldout-02** (the user's data; nothing chosen there): ``learn`` with learn's default (``init_from``)
   on each explored recording given (600, 300, 200 episodes; 200 is expected to be refused by the plan),
   closed loop on the 100 fresh tasks x 3 seeds of RESULTS 9/9b (a recording the plan refuses is rerun
   with ``train.splits: [0.7, 0.3, 0.0]``, reported as a supplement); contrasts against Recent-4 (``--recent``,
   independent of any selector setting), the bundled selector (``--bundled``, or evaluated afresh when not
   given: required after a change of the threshold rule) and, with ``--scratch``, the selectors learned from
   scratch on the same 600-episode recording.

Writes ``<out>/warmstart.json`` (all reports) and a compact ``docs/notebook/results/learn_heldout02_warmstart.json``
(``--results``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SOURCES = ("teacher_forced", "agreement")
#: fine-tuning learning rates compared on dev-00 beside learn's default then (3e-4, the regression loss's)
PROBE_LRS = (0.003, 0.001)
#: splits of the supplementary run on a recording the default plan refuses (no test split: its states
#: go to dev, which the threshold needs; what the refusal tells a user to do short of recording more)
NO_TEST_SPLITS = [0.7, 0.3, 0.0]


def _run(args: list[str]) -> dict | None:
    """``learn_heldout.main(args)``; its report, or None with the refusal when learn refused."""
    import learn_heldout

    from causalcache_lab.learn import InsufficientDataError

    out = Path(args[args.index("--out") + 1])
    print("$ python lab/tools/learn_heldout.py " + " ".join(args), flush=True)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            learn_heldout.main(args)
    except InsufficientDataError as exc:
        return {"refused": str(exc)}
    return json.loads((out / "report.json").read_text())


def _dev00(out: Path, sources: str) -> dict:
    base = out / "dev00"
    common = ["--world", "dev-00", "--eval", "40", "--k", "4"]
    rec = _run(["--out", str(base), *common, "--record", "300", "--explore", "0.6", "--sources", ""])
    arms = [
        "--record-dir", str(base / "record"), "--sources", sources,
        "--recent", str(base / "eval-recent/results.json"),
        "--bundled", str(base / "eval-bundled/results.json"),
    ]  # fmt: skip
    report = {"record_and_bundled": rec}
    for init in ("bundled", "null"):
        report[f"init_{init}"] = _run(
            ["--out", str(base / f"init_{init}"), *common, *arms, "--init-from", init]
        )
    for lr in PROBE_LRS:  # the fine-tuning learning rate: learn's default (3e-4) is init_bundled above
        train = ["--train", json.dumps({"lr": lr})]
        report[f"init_bundled_lr{lr}"] = _run(
            ["--out", str(base / f"init_bundled_lr{lr}"), *common, *arms, "--init-from", "bundled", *train]
        )
    from paired_contrast import contrast

    report["bundled_init_vs_scratch"] = {
        s: contrast(
            f"{base}/init_bundled/eval-{s}/results.json:causalcache",
            f"{base}/init_null/eval-{s}/results.json:causalcache",
        )
        for s in sources.split(",")
    }
    return report


def _heldout(out: Path, records: list[str], recent: str, bundled: str | None, sources: str) -> dict:
    report = {}
    for rec in records:
        n = len(json.loads((Path(rec) / "success.json").read_text()))
        args = ["--out", str(out / f"heldout02_{n}"), "--world", "heldout-02", "--eval", "100", "--k", "4"]
        args += ["--record-dir", rec, "--sources", sources, "--recent", recent]
        if bundled:
            args += ["--bundled", bundled]
        report[str(n)] = _run(args)
        if "refused" in (report[str(n)] or {}):
            args[args.index("--out") + 1] += "_dev30"
            report[f"{n}_no_test_split"] = _run([*args, "--train", json.dumps({"splits": NO_TEST_SPLITS})])
    return report


def _versus_scratch(out: Path, scratch: str, n: int, sources: str) -> dict:
    from paired_contrast import contrast

    mine = out / f"heldout02_{n}"
    return {
        s: contrast(
            f"{mine}/eval-{s}/results.json:causalcache", f"{scratch}/eval-{s}/results.json:causalcache"
        )
        for s in sources.split(",")
        if (mine / f"eval-{s}/results.json").exists()
    }


def _compact(full: dict) -> dict:
    """Contrasts, OOD, fire and the learn summaries' key numbers (no per-episode data)."""

    def arm_rows(rep: dict | None) -> dict:
        if not rep or "refused" in rep:
            return rep or {}
        rows: dict = {"eval": rep.get("eval"), "contrasts": {}}
        for name, c in rep.get("contrasts", {}).items():
            rows["contrasts"][name] = {k: c[k] for k in ("memory_critical", "control", "all")}
        for s in SOURCES:
            learn = rep.get(f"learn-{s}")
            if learn:
                m = learn["stages"]["model"]
                keep = ("states", "best_epoch", "dev", "calibration", "init_from", "train_seconds")
                rows[f"learn-{s}"] = {k: m.get(k) for k in keep}
                rows[f"learn-{s}"]["ood_dev_flagged"] = m["ood"].get("dev_flagged")
                rows[f"learn-{s}"]["ood_train_flagged"] = m["ood"].get("train_flagged")
        return rows

    dev = full["dev00"]
    return {
        "note": full["note"],
        "dev00": {
            "bundled_vs_recent": arm_rows(dev["record_and_bundled"]),
            **{k: arm_rows(v) for k, v in dev.items() if k.startswith("init_")},
            "bundled_init_vs_scratch": {
                s: {k: c[k] for k in ("memory_critical", "control")}
                for s, c in dev["bundled_init_vs_scratch"].items()
            },
        },
        "heldout02": {n: arm_rows(r) for n, r in full["heldout02"].items()},
        "heldout02_600_vs_scratch": {
            s: {k: c[k] for k in ("memory_critical", "control")}
            for s, c in full.get("heldout02_600_vs_scratch", {}).items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="runs/warmstart")
    p.add_argument("--heldout-records", required=True, help="comma-separated explored recordings")
    p.add_argument("--recent", required=True, help="Recent-4 results.json on heldout-02's 100 tasks")
    p.add_argument("--bundled", help="bundled-selector results.json on the same tasks (else evaluated)")
    p.add_argument("--scratch", help="an earlier learn_heldout --out of from-scratch selectors (600)")
    p.add_argument("--sources", default=",".join(SOURCES))
    p.add_argument("--results", default="docs/notebook/results/learn_heldout02_warmstart.json")
    args = p.parse_args(argv)
    out = Path(args.out)
    from causalcache_lab.learn.config import LEARN_INIT_FROM

    full: dict = {
        "note": "RESULTS.md 9c: learn fine-tunes the bundled selector (train.init_from); default chosen on "
        f"dev-00 (learn's default now: {LEARN_INIT_FROM!r}); heldout-02 is the user's data",
        "dev00": _dev00(out, args.sources),
    }
    records = [r for r in args.heldout_records.split(",") if r]
    full["heldout02"] = _heldout(out, records, args.recent, args.bundled, args.sources)
    if args.scratch:
        full["heldout02_600_vs_scratch"] = _versus_scratch(out, args.scratch, 600, args.sources)
    (out / "warmstart.json").write_text(json.dumps(full, indent=1, default=str))
    Path(args.results).write_text(json.dumps(_compact(full), indent=1, default=str) + "\n")
    print(json.dumps(_compact(full)["heldout02"], indent=1, default=str)[:4000])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
