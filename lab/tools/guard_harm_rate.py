"""Do the OOD guard's refusals sit where swaps hurt? Harm and help rates of swaps the guard would refuse vs
accept, measured with the guard off (issue 54 item 1's check; nothing in the guard changes).

Runs the closed-loop harness (``causalcache_lab.eval.closed_loop``) on development worlds with two
arms, Recent-4 and the bundled selector **with its guard off**, over the same tasks and policy seeds. Each
selector decision still gets the guard's verdict, computed exactly as the guard would (its mask pattern,
distance and that pattern's threshold, recorded as ``ood_masked`` / ``ood_distance``), but the decision
goes on as if it had accepted. A decision *swapped* when ``k > 0``.

Harm is judged per episode against the paired Recent-4 episode (same task, same policy seed): a
selector episode without any swap shows Recent-4's prompts, so a different outcome comes from its swaps.
Episodes with at least one swap are split by whether the guard would have refused **any** of their swaps
(``refused``) or accepted all of them (``accepted``); for each group: episodes, swaps, harmed (Recent-4
solved it, the selector did not), helped (the other way), and the rates per episode. Also per decision:
the share of swaps the guard would refuse.

    python lab/tools/guard_harm_rate.py --tasks 40 --seeds 0,1,2 --worlds dev
    python lab/tools/guard_harm_rate.py --tasks 40 --seeds 0,1,2 --worlds dev --text-format at-raw

``--guard refit`` judges with the guard refitted on each allocator's own first ``--warmup`` decisions
(``ood_refit``, docs/notebook/results/guard_rule.md; the bundled guard during the warm-up) instead of the bundled one.

``--guard witness`` judges with the witness-source check only (``witness_check``,
docs/notebook/results/guard_rule_try2.md: a swap is refused when the guard-off set displaces a Recent-B
screen showing the value the pass-1 proposal types), ``--guard try2`` with guard try 2's rule (that check,
or the refit guard after its ``--warmup`` decisions; no covariate verdict during the warm-up).

``--text-format at-raw`` gives the selector each world screen's text with every line's position appended
(``Order #526321 @(412,318)``: an agent's element list) and reads it as is, as the library did before the
screen-text normaliser: a development source the guard refuses most of, so the rates can be compared.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from collections import defaultdict

from causalcache_lab.eval.stats import count_harm, harm_rates
from causalcache_memory.allocation.base import exact_b_size
from causalcache_memory.selector.allocator import SelectorAllocator
from causalcache_memory.selector.ood import RobustGuard, state_summary
from causalcache_memory.selector.ood_explain import far_group, group_contributions
from causalcache_memory.selector.witness_check import displaced_sources, witness_sources

_DECIDE = SelectorAllocator.decide
_ALLOCATE = SelectorAllocator.allocate
#: None: the bundled guard's verdicts; an integer N: the guard refitted after N decisions (``ood_refit``)
REFIT_WARMUP: int | None = None
#: the covariate guard gives no verdict during the refit's warm-up (guard try 2's ``ood_refit_warmup: open``)
OPEN_WARMUP = False
#: what counts as a refusal: the covariate guard's (``ood_group``), the witness check's, or either
REFUSED = "guard"


def _allocate_witness(self, ctx):
    """The guard-off decision, carrying ``witness_kept`` when its set displaces a witness source."""
    allocation = _ALLOCATE(self, ctx)
    if exact_b_size(ctx.t, ctx.budget) < ctx.t - 1:
        cache = self._extractor_for(ctx.archive).screen_text
        sources = witness_sources(cache, ctx.trace, ctx.budget, ctx.witness)
        if sources and displaced_sources(sources, allocation.selected):
            allocation.info["witness_kept"] = list(sources)
    return allocation


def _refused(record: dict) -> bool:
    guard, witness = bool(record.get("ood_group")), "witness_kept" in record
    return {"guard": guard, "witness": witness, "either": guard or witness}[REFUSED]


def _decide_guard_off(self, events, *, t, budget, witness, sources=()):
    """The selector's decision with the guard off, carrying the verdict the guard would have given."""
    guard = self.model.ood
    saved, self.ood_guard = self.ood_guard, False
    try:
        # no witness sources held either (the check is on by default since try 2): the guard-off decision
        allocation = _DECIDE(self, events, t=t, budget=budget, witness=witness, sources=())
    finally:
        self.ood_guard = saved
    if events is not None and isinstance(guard, RobustGuard):
        summary = state_summary(events, self.model.drop_index)
        if REFIT_WARMUP is not None:
            from causalcache_memory.selector.ood_refit import RefitGuard

            shadow = self.__dict__.setdefault("_shadow_refit", RefitGuard(guard, REFIT_WARMUP))
            guard = shadow.observe(summary)
            if OPEN_WARMUP and not shadow.refitted:
                return allocation
        key, distance, threshold = guard.judge(summary)
        allocation.info["ood_distance"] = round(distance, 4)
        allocation.info["ood_masked"] = key or None
        if not distance <= threshold:
            allocation.info["ood_group"] = far_group(group_contributions(guard, summary)) or "?"
    return allocation


def _at_positions(self, sha256: str) -> str | None:
    """The world screen's text with each line's position appended, ``@(x,y)`` on a 0-1000 grid."""
    lines = self.get_lines(sha256)
    if lines is None:
        return None
    return "\n".join(f"{t} @({round(500 * (b[0] + b[2]))},{round(500 * (b[1] + b[3]))})" for t, b in lines)


def measure(tasks: int, seeds: tuple[int, ...], worlds: str, seed: int, text_format: str = "world") -> dict:
    """``text_format``: ``world`` (the worlds' own OCR text), ``at`` (each line ending with ``@(x,y)``,
    read through the normaliser) or ``at-raw`` (the same, read as is: before the normaliser)."""
    import causalcache_memory.selector.screen_text as screen_text
    from causalcache_lab.eval.closed_loop import ClosedLoopSettings, run_closed_loop
    from causalcache_lab.selector.world_text import WorldScreenText

    get_text, normalizers = (
        WorldScreenText.get_text,
        (screen_text.normalize_screen_text, screen_text.normalize_line),
    )
    SelectorAllocator.decide = _decide_guard_off  # type: ignore[method-assign]
    SelectorAllocator.allocate = _allocate_witness  # type: ignore[method-assign]
    if text_format != "world":
        WorldScreenText.get_text = _at_positions  # type: ignore[method-assign]
    if text_format == "at-raw":
        screen_text.normalize_screen_text = screen_text.normalize_line = lambda text: text  # type: ignore[assignment]
    try:
        settings = ClosedLoopSettings(
            tasks=tasks,
            seed=seed,
            arms=("recent", "causalcache"),
            policy_seeds=seeds,
            worlds=worlds,
            workers=1,
        )
        episodes: list[dict] = []

        def keep(o) -> None:
            episodes.append(o.with_log())

        with tempfile.TemporaryDirectory() as out:
            run_closed_loop(settings, out, progress=False, on_episode=keep)
    finally:
        SelectorAllocator.decide = _DECIDE  # type: ignore[method-assign]
        SelectorAllocator.allocate = _ALLOCATE  # type: ignore[method-assign]
        WorldScreenText.get_text = get_text  # type: ignore[method-assign]
        screen_text.normalize_screen_text, screen_text.normalize_line = normalizers
    global REFUSED
    out = {"text_format": text_format, **tally(episodes)}
    if REFUSED == "either":  # guard try 2: also each part of its rule alone
        saved = REFUSED
        for part in ("guard", "witness"):
            REFUSED = part
            out[f"only_{part}"] = tally(episodes)
        REFUSED = saved
    return out


def tally(episodes: list[dict]) -> dict:
    by_key = {(e["task_id"], e["seed"], e["arm"]): e for e in episodes}
    groups: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    swaps = refused_swaps = declines = decisions = 0
    far: dict[str, int] = defaultdict(int)
    for (task, seed, arm), e in by_key.items():
        if arm != "causalcache":
            continue
        base = by_key[(task, seed, "recent")]
        refused = [_refused(r) for r in e["log"]]
        decisions += sum(1 for r in e["log"] if "ood_distance" in r)
        declines += sum(refused)
        for r in e["log"]:
            if r.get("ood_group"):
                far[r["ood_group"]] += 1
            if "witness_kept" in r:
                far["witness"] += 1
        swapped = [r.get("k", 0) > 0 for r in e["log"]]
        n_swaps = sum(swapped)
        n_refused = sum(s and f for s, f in zip(swapped, refused, strict=True))
        swaps += n_swaps
        refused_swaps += n_refused
        kind = "no_swap" if not n_swaps else ("refused" if n_refused else "accepted")
        count_harm(
            groups[f"{kind}/{e['split']}"], swaps=n_swaps, base_success=base["success"], success=e["success"]
        )
    out = harm_rates(groups)
    return {
        "decisions_scored": decisions,
        "would_decline": declines,
        "swaps": swaps,
        "swaps_the_guard_would_refuse": refused_swaps,
        "far_groups_of_refusals": dict(far),
        "episodes": out,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--worlds", default="dev")
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--text-format", default="world", choices=("world", "at", "at-raw"))
    parser.add_argument("--guard", default="bundled", choices=("bundled", "refit", "witness", "try2"))
    parser.add_argument("--warmup", type=int, default=64, help="with --guard refit: warm-up decisions")
    args = parser.parse_args(argv)
    global REFIT_WARMUP, OPEN_WARMUP, REFUSED
    REFIT_WARMUP = args.warmup if args.guard in ("refit", "try2") else None
    OPEN_WARMUP = args.guard == "try2"
    REFUSED = {"witness": "witness", "try2": "either"}.get(args.guard, "guard")
    seeds = tuple(int(s) for s in args.seeds.split(","))
    print(json.dumps(measure(args.tasks, seeds, args.worlds, args.seed, args.text_format), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
