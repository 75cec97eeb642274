"""Is the selector's predicted gain calibrated? Predicted-gain bins against realised swap success.

Read from a closed-loop ``results.json`` (episodes of the ``causalcache`` arm; :mod:`~causalcache_memory.
lab.eval.world_agent` records every swap's predicted gain and restored steps, and the steps whose screen
showed a value the task needs -- the world's ground truth, which no arm reads).

Definition (stated before the held-out run): a **swap** is a decision whose set differs from Recent-B
(``k > 0``, pass 2 ran). It is **right** when at least one restored step (in the set, not in Recent-B)
showed a value the task needs and no step of Recent-B already showed one; otherwise it is wrong (it
restored only steps without needed values, or the evidence was already in the window). Swaps are binned
by their predicted gain (the beam's accumulated ``Δ̂`` over Recent-B) into quantile bins of all swaps, and
each bin reports its swaps, right swaps and the right share with a Wilson 95% interval. Calibrated means
the right share rises with the predicted gain (top bin above bottom bin).

Also: the share of all decisions where pass 2 ran and the share the OOD guard declined, per task split.

``python -m causalcache_lab.eval.reliability RESULTS_JSON [--arm causalcache] [--bins 4]
[--worlds heldout]`` prints the table as Markdown.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["decision_rates", "paired_contrast", "reliability_table", "swap_outcomes"]


def swap_outcomes(
    episodes: Sequence[Mapping[str, Any]], arm: str = "causalcache"
) -> list[tuple[float, bool]]:
    """``(predicted gain, right)`` for every swap of ``arm``'s memory-critical episodes (see module doc)."""
    out: list[tuple[float, bool]] = []
    for ep in episodes:
        if ep.get("arm") != arm or ep.get("split") != "memory_critical":
            continue
        evidence = set(ep.get("evidence_steps", ()))
        budget = int(ep.get("budget", 4))
        for swap in ep.get("swaps", ()):
            t, gain = int(swap["t"]), swap.get("predicted_gain")
            if gain is None:
                continue
            recent = set(range(max(1, t - budget), t))
            restored = set(swap.get("restored", ()))
            right = bool(restored & evidence) and not (recent & evidence)
            out.append((float(gain), right))
    return out


def _wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return float("nan"), float("nan")
    z, p = 1.96, k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def reliability_table(swaps: Sequence[tuple[float, bool]], bins: int = 4) -> list[dict[str, Any]]:
    """Quantile bins of predicted gain: ``{"lo", "hi", "swaps", "right", "share", "ci"}`` per bin."""
    if not swaps:
        return []
    ordered = sorted(swaps)
    rows = []
    for b in range(bins):
        part = ordered[b * len(ordered) // bins : (b + 1) * len(ordered) // bins]
        if not part:
            continue
        right = sum(r for _, r in part)
        rows.append(
            {
                "lo": part[0][0],
                "hi": part[-1][0],
                "swaps": len(part),
                "right": right,
                "share": right / len(part),
                "ci": _wilson(right, len(part)),
            }
        )
    return rows


def decision_rates(
    episodes: Sequence[Mapping[str, Any]], arm: str = "causalcache"
) -> dict[str, dict[str, float]]:
    """Per task split (and ``all``): decisions, share with pass 2, share declined as ``ood``."""
    out: dict[str, dict[str, float]] = {}
    for split in ("all", "memory_critical", "control"):
        eps = [e for e in episodes if e.get("arm") == arm and (split == "all" or e.get("split") == split)]
        passes = [p for e in eps for p in e.get("second_pass", ())]
        falls = [f for e in eps for f in e.get("fallbacks", ())]
        n = len(passes)
        out[split] = {
            "decisions": n,
            "pass2_share": sum(passes) / n if n else float("nan"),
            "ood_share": sum(f == "ood" for f in falls) / len(falls) if falls else float("nan"),
        }
    return out


def paired_contrast(
    episodes: Sequence[Mapping[str, Any]], arm: str, baseline: str, split: str, *, seed: int = 0
) -> dict[str, Any]:
    """``arm - baseline`` on ``split``: task scores (mean success over seeds), task-paired bootstrap 95%
    interval over the tasks both arms ran, and the tasks helped / harmed."""
    from causalcache_lab.eval.stats import paired_difference

    def scores(name: str) -> dict[str, float]:
        runs: dict[str, list[float]] = {}
        for e in episodes:
            if e.get("arm") == name and (split == "all" or e.get("split") == split):
                runs.setdefault(str(e["task_id"]), []).append(float(e["success"]))
        return {t: sum(v) / len(v) for t, v in runs.items()}

    a, b = scores(arm), scores(baseline)
    tasks = [t for t in a if t in b]
    est = paired_difference([a[t] for t in tasks], [b[t] for t in tasks], seed=seed)
    return {
        "delta": est.value,
        "ci": (est.low, est.high),
        "tasks": len(tasks),
        "helped": sum(a[t] > b[t] for t in tasks),
        "harmed": sum(a[t] < b[t] for t in tasks),
    }


def _markdown(rows: Sequence[Mapping[str, Any]], rates: Mapping[str, Mapping[str, float]]) -> str:
    lines = ["| predicted gain | swaps | right | right share [95% CI] |", "|---|---|---|---|"]
    for r in rows:
        lo, hi = r["ci"]
        lines.append(
            f"| {r['lo']:.3f} – {r['hi']:.3f} | {r['swaps']} | {r['right']} | "
            f"{r['share']:.2f} [{lo:.2f}, {hi:.2f}] |"
        )
    lines += ["", "| split | decisions | pass 2 | OOD |", "|---|---|---|---|"]
    for split, v in rates.items():
        lines.append(f"| {split} | {v['decisions']} | {v['pass2_share']:.3f} | {v['ood_share']:.3f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("results", help="closed-loop results.json")
    parser.add_argument("--arm", default="causalcache")
    parser.add_argument("--bins", type=int, default=4)
    parser.add_argument("--worlds", default=None, help="only episodes of worlds whose id starts with this")
    parser.add_argument("--versus", default="", help="comma-separated arms to contrast --arm with")
    args = parser.parse_args(argv)
    episodes = json.loads(Path(args.results).read_text(encoding="utf-8"))["episodes"]
    if args.worlds:
        episodes = [e for e in episodes if str(e.get("world", "")).startswith(args.worlds)]
    budget = json.loads(Path(args.results).read_text(encoding="utf-8"))["meta"]["budget"]
    episodes = [e for e in episodes if e.get("budget") == budget]
    rows = reliability_table(swap_outcomes(episodes, args.arm), args.bins)
    print(_markdown(rows, decision_rates(episodes, args.arm)))
    for other in [v for v in args.versus.split(",") if v]:
        for split in ("memory_critical", "control"):
            c = paired_contrast(episodes, args.arm, other, split)
            print(
                f"{args.arm} - {other}, {split}: {c['delta']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}] "
                f"(tasks {c['tasks']}, helped {c['helped']}, harmed {c['harmed']})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
