"""Closed-loop results as plain text (for the CLI and RESULTS.md): the arms x splits table, the per-split
tables against Recent-B (success, paired difference, tasks helped / harmed, pass-2 fire rate, and on
controls the non-inferiority check), and the contrasts in plain words. Missing numbers print as ``n/a``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from causalcache_lab.eval.plots import SPLIT_LABELS, SPLITS, _budget, _number, arm_label, ordered_arms

__all__ = ["contrast_sentences", "format_table", "selector_verdicts", "split_tables", "world_tables"]

_SPLIT_PHRASE = {"all": "all tasks", "memory_critical": "memory-critical tasks", "control": "control tasks"}


def _fmt(value: object, digits: int = 2, *, signed: bool = False) -> str:
    x = _number(value)
    if x is None:
        return "n/a"
    return f"{x:+.{digits}f}" if signed else f"{x:.{digits}f}"


def _ci(ci: object, digits: int = 2) -> str:
    if isinstance(ci, Sequence) and not isinstance(ci, str) and len(ci) == 2:
        return f"[{_fmt(ci[0], digits)}, {_fmt(ci[1], digits)}]"
    return "[n/a]"


def _get(mapping: object, *keys: str) -> Any:
    for key in keys:
        if not isinstance(mapping, Mapping):
            return None
        mapping = mapping.get(key)
    return mapping


def _success_cell(cell: object) -> str:
    if not isinstance(cell, Mapping):
        return "n/a"
    n = cell.get("n")
    return f"{_fmt(cell.get('success'))} {_ci(cell.get('ci95'))} n={n if isinstance(n, int) else 'n/a'}"


def _k_profile(profile: object) -> str:
    """``k0 80% k1 15% k2 5%`` sorted by k; ``n/a`` when absent."""
    if not isinstance(profile, Mapping) or not profile:
        return "n/a"

    def key(item: tuple[object, object]) -> tuple[int, str]:
        k = str(item[0])
        return (int(k), k) if k.isdigit() else (1 << 30, k)

    parts = []
    for k, frac in sorted(profile.items(), key=key):
        x = _number(frac)
        parts.append(f"k{k} {'n/a' if x is None else f'{100 * x:.0f}%'}")
    return " ".join(parts)


def _check(results: object) -> Mapping[str, Any]:
    if not isinstance(results, Mapping):
        raise TypeError(f"results must be the dict of results.json, got {type(results).__name__}")
    if not isinstance(results.get("arms", {}), Mapping):
        raise TypeError(f"results['arms'] must map arm names to their results, got {results['arms']!r:.80}")
    return results


def contrast_sentences(results: Mapping[str, Any]) -> list[str]:
    """Plain-language lines for ``results["contrasts"]``, e.g.
    ``CausalCache − Recent-4 on memory-critical tasks: +0.35 [0.20, 0.50] (interval excludes zero)``."""
    contrasts = _check(results).get("contrasts")
    if not isinstance(contrasts, Mapping):
        return []
    name = f"{arm_label('causalcache')} − {arm_label('recent', _budget(results))}"
    lines = []
    for key in (*SPLITS, "interaction"):
        c = contrasts.get(key)
        if not isinstance(c, Mapping):
            continue
        what = (
            f"{name} on {_SPLIT_PHRASE[key]}"
            if key != "interaction"
            else "Split × method interaction (memory-critical gain − control gain)"
        )
        ci = c.get("ci95")
        lo, hi = (
            (_number(ci[0]), _number(ci[1])) if isinstance(ci, Sequence) and len(ci) == 2 else (None, None)
        )
        if lo is None or hi is None:
            verdict = ""
        elif key == "control" and "non_inferior" in c:
            margin = _fmt(c.get("ni_margin"))
            verdict = (
                f" (non-inferior at margin {margin}: interval above -{margin})"
                if c.get("non_inferior")
                else f" (non-inferiority at margin {margin} not shown)"
            )
        elif lo > 0 or hi < 0:
            verdict = " (95% interval excludes zero)"
        else:
            verdict = " (95% interval includes zero)"
        counts = (
            f"; helped {c['helped']}, harmed {c['harmed']} of {c.get('n', 'n/a')} tasks"
            if "helped" in c
            else ""
        )
        lines.append(f"{what}: {_fmt(c.get('delta'), signed=True)} {_ci(ci)}{verdict}{counts}")
    return lines


def format_table(results: Mapping[str, Any]) -> str:
    """Plain-text table for the CLI: one row per arm; success ``[95% CI]`` and n per split, the pass-2
    fire rate and the realized k profile; then the contrast sentences."""
    results = _check(results)
    budget = _budget(results)
    header = ["arm", *(SPLIT_LABELS[s] for s in SPLITS), "fire rate", "k profile"]
    cached = any(isinstance(_get(d, "prompt_cache"), Mapping) for d in results["arms"].values())
    if cached:  # predicted prompt-cache writes and reads per step (a metered run, docs/PROMPT_COST.md)
        header.append("cache write/read per step")
    rows = [header]
    for arm in ordered_arms(results):
        data = results["arms"][arm]
        cache = _get(data, "prompt_cache")
        rows.append(
            [
                arm_label(arm, budget),
                *(_success_cell(_get(data, s)) for s in SPLITS),
                _fmt(_get(data, "fire_rate")),
                _k_profile(_get(data, "k_profile")),
                *(
                    [f"{cache['cache_write_per_step']:.0f} / {cache['cache_read_per_step']:.0f}"]
                    if isinstance(cache, Mapping)
                    else ["-"]
                    if cached
                    else []
                ),
            ]
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    sentences = contrast_sentences(results)
    tables = (
        world_tables(results) if isinstance(results.get("world_splits"), Mapping) else split_tables(results)
    )
    verdicts = selector_verdicts(results)
    return "\n".join(
        [
            *lines,
            *(["", tables] if tables else []),
            *(["", *sentences] if sentences else []),
            *(["", *verdicts] if verdicts else []),
        ]
    )


def _grid(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines


def split_tables(results: Mapping[str, Any]) -> str:
    """Per split (memory-critical, control): each arm's success, its task-paired difference to Recent-B,
    tasks helped / harmed and the pass-2 fire rate; controls add the non-inferiority verdict."""
    results = _check(results)
    by_arm = results.get("contrasts_by_arm")
    if not isinstance(by_arm, Mapping) or not by_arm:
        return ""
    budget = _budget(results)
    meta = results.get("meta") if isinstance(results.get("meta"), Mapping) else {}
    seeds = meta.get("policy_seeds") or []
    out: list[str] = []
    for split in ("memory_critical", "control"):
        header = [
            "arm",
            "success [95% CI]",
            f"Δ vs {arm_label('recent', budget)} [95% CI]",
            "helped",
            "harmed",
        ]
        header += ["pass-2 fire rate", "ood"] + (["non-inferior"] if split == "control" else [])
        rows = [header]
        for arm in ordered_arms(results):
            cell = _get(results["arms"][arm], split)
            c = _get(by_arm, arm, split)
            row = [arm_label(arm, budget), f"{_fmt(_get(cell, 'success'))} {_ci(_get(cell, 'ci95'))}"]
            if isinstance(c, Mapping):
                row += [
                    f"{_fmt(c.get('delta'), signed=True)} {_ci(c.get('ci95'))}",
                    str(c.get("helped", "n/a")),
                ]
                row += [str(c.get("harmed", "n/a"))]
            else:
                row += ["(baseline)", "-", "-"]
            row += [_fmt(_get(cell, "fire_rate")), _fmt(_get(cell, "ood_rate"))]
            if split == "control":
                row.append("-" if not isinstance(c, Mapping) else ("yes" if c.get("non_inferior") else "no"))
            rows.append(row)
        n = _get(results["arms"][ordered_arms(results)[0]], split, "n")
        margin = _get(by_arm, next(iter(by_arm)), "control", "ni_margin")
        note = f"; non-inferior = interval lower end above -{_fmt(margin)}" if split == "control" else ""
        out.append(f"{SPLIT_LABELS[split]} (n={n} tasks, mean over {len(seeds) or 1} policy seed(s){note})")
        out += _grid(rows)
        out.append("")
    return "\n".join(out).rstrip()


_WORLD_SPLIT_TITLE = {
    "heldout": "Held-out worlds",
    "dev": "Development worlds",
    "train": "Training worlds",
    "v2": "World v2",
}


def _delta_cell(c: object) -> str:
    if not isinstance(c, Mapping):
        return "n/a"
    return f"{_fmt(c.get('delta'), signed=True)} {_ci(c.get('ci95'))} {c.get('helped', '?')}/{c.get('harmed', '?')}"


def _knob_text(knobs: object) -> str:
    if not isinstance(knobs, Mapping):
        return ""
    age = knobs.get("after_read")
    age_text = f"after-read {age[0]}-{age[1]}" if isinstance(age, Sequence) and len(age) == 2 else ""
    return " ".join(
        str(x) for x in (knobs.get("vocab"), knobs.get("layout"), knobs.get("platform"), age_text)
    )


def world_tables(results: Mapping[str, Any]) -> str:
    """Per world split: the aggregate per-split tables (task-paired over every task of the split's worlds),
    then one row per world and arm: Δ vs Recent-B on memory-critical and control tasks with the interval
    and tasks helped/harmed, and the pass-2 fire and OOD rates."""
    results = _check(results)
    splits = results.get("world_splits")
    rows_by_world = results.get("world_rows")
    if not isinstance(splits, Mapping):
        return ""
    meta = results.get("meta") if isinstance(results.get("meta"), Mapping) else {}
    budget = _budget(results)
    out: list[str] = []
    for split, agg in splits.items():
        if not isinstance(agg, Mapping):
            continue
        worlds = [str(w) for w in agg.get("worlds") or []]
        title = _WORLD_SPLIT_TITLE.get(str(split), str(split))
        out.append(f"== {title} ({', '.join(worlds)}): aggregate, task-paired over all their tasks ==")
        out.append(split_tables({**agg, "meta": meta}))
        header = [
            "world",
            "knobs",
            "arm",
            "memory-critical Δ [95% CI] helped/harmed",
            "control Δ [95% CI] helped/harmed",
        ]
        grid = [[*header, "fire", "ood"]]
        for world in worlds:
            row = rows_by_world.get(world) if isinstance(rows_by_world, Mapping) else None
            if not isinstance(row, Mapping):
                continue
            for arm in ordered_arms(row):
                if arm == "recent":
                    continue
                c = _get(row, "contrasts_by_arm", arm)
                grid.append(
                    [
                        world,
                        _knob_text(row.get("knobs")),
                        arm_label(arm, budget),
                        _delta_cell(_get(c, "memory_critical")),
                        _delta_cell(_get(c, "control")),
                        _fmt(_get(row, "arms", arm, "fire_rate")),
                        _fmt(_get(row, "arms", arm, "ood_rate")),
                    ]
                )
        if len(grid) > 1:
            out.append("")
            out.append(f"{title}, per world (Δ vs {arm_label('recent', budget)}):")
            out += _grid(grid)
        out.append("")
    return "\n".join(out).rstrip()


def selector_verdicts(results: Mapping[str, Any]) -> list[str]:
    """One plain sentence per world split saying whether the learned selector gains over Recent-B on
    memory-critical tasks (its interval above zero) -- and saying so when it does not."""
    results = _check(results)
    splits = results.get("world_splits")
    if not isinstance(splits, Mapping):
        return []
    budget = _budget(results)
    lines = []
    for split, agg in splits.items():
        c = _get(agg, "contrasts_by_arm", "causalcache", "memory_critical")
        if not isinstance(c, Mapping):
            continue
        ci = c.get("ci95")
        low = _number(ci[0]) if isinstance(ci, Sequence) and len(ci) == 2 else None
        ood = _fmt(_get(agg, "arms", "causalcache", "ood_rate"))
        fire = _fmt(_get(agg, "arms", "causalcache", "fire_rate"))
        title = _WORLD_SPLIT_TITLE.get(str(split), str(split))
        gains = low is not None and low > 0
        verdict = "gains" if gains else "does NOT gain"
        lines.append(
            f"{title}: the learned selector {verdict} over {arm_label('recent', budget)} on memory-critical "
            f"tasks: {_fmt(c.get('delta'), signed=True)} {_ci(ci)}"
            f"{'' if gains else ' (95% interval not above zero)'}; pass 2 fired on {fire} of two-pass "
            f"decisions, the OOD guard declined {ood}"
        )
    return lines
