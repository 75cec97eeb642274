"""``causalcache bench``: per-step overhead benchmarks, printed as a table and written as JSON."""

from __future__ import annotations

import argparse
import contextlib
import logging
import warnings
from collections.abc import Iterator

SCENARIO_NAMES = ("overhead", "selector", "selector_world", "archive", "checkpoint", "two_pass", "agent")
#: run only when named: ``ocr`` (screen text at agent speed, minutes of OCR; needs the [ocr] extra)
OPT_IN_NAMES = ("ocr",)


class OwnWarnings(logging.Handler):
    """Counts, and keeps off the terminal, the library's warnings about the benchmark's own synthetic
    scenarios (an idle selector on a random trace is the point of a latency scenario, not advice for the
    user): :class:`~causalcache_memory.errors.CausalCacheWarning` and WARNING records of the
    ``causalcache_memory`` logger, while :meth:`silenced` is active."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        self.count += 1

    @contextlib.contextmanager
    def silenced(self) -> Iterator[OwnWarnings]:
        from causalcache_memory.errors import CausalCacheWarning

        logger = logging.getLogger("causalcache_memory")
        propagate, level = logger.propagate, logger.level
        logger.addHandler(self)
        logger.propagate = False
        logger.setLevel(min(level or logging.WARNING, logging.WARNING))
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", CausalCacheWarning)
                yield self
            self.count += sum(1 for w in caught if issubclass(w.category, CausalCacheWarning))
            for w in caught:  # anything else is not ours to hide
                if not issubclass(w.category, CausalCacheWarning):
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        finally:
            logger.removeHandler(self)
            logger.propagate, logger.level = propagate, level


def _run(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from causalcache_lab.bench.runner import format_table, run_benchmarks
    from causalcache_memory._jsonl import dumps_json

    if args.quick:
        print(
            "causalcache bench --quick: every scenario at small sizes, to check that they run (one to four "
            "minutes on two cores); its figures are not judged against the targets",
            file=sys.stderr,
        )
    with OwnWarnings().silenced() as own:
        results = run_benchmarks(
            quick=args.quick,
            scenarios=args.scenarios or SCENARIO_NAMES,
            policy=args.policy,
            model_path=args.model_path,
            workdir=args.workdir,
            progress=lambda msg: print(msg, file=sys.stderr, flush=True),
        )
    if own.count:
        print(
            f"({own.count} warnings of the library about the benchmark's own synthetic scenarios were not shown)",
            file=sys.stderr,
        )
    results["meta"]["command"] = "causalcache bench " + " ".join(sys.argv[2:] if len(sys.argv) > 2 else [])
    print(format_table(results))
    if args.json:
        path = Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(dumps_json(results, indent=2, sort_keys=True) + "\n")
        print(f"wrote {path}")
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="measure what the memory adds to each agent step (table + JSON)",
        description="Per-step overhead, selector latency (random traces; selector_world: the full decision on "
        "a 200-event world trace), archive throughput, checkpoint growth and two-pass "
        "accounting. Timings use one CPU thread where the code allows it.",
    )
    parser.add_argument("--json", metavar="FILE", help="write all results as JSON to FILE")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="every scenario at small sizes, to check that they run (one to four minutes on two cores); "
        "its figures are not judged against the targets",
    )
    parser.add_argument(
        "--policy",
        default="simulated",
        metavar="RUNTIME|CONFIG.yaml",
        help="policy runtime of the two-pass scenario: simulated (default), transformers (with --model-path), "
        "or a CausalCache config YAML whose `policy` section names any runtime (sglang, openai, transformers)",
    )
    parser.add_argument(
        "--model-path", metavar="DIR", help="local Qwen-VL directory for --policy transformers"
    )
    parser.add_argument(
        "--scenarios",
        nargs="+",
        choices=SCENARIO_NAMES + OPT_IN_NAMES,
        metavar="NAME",
        help=f"subset to run (default: all of {', '.join(SCENARIO_NAMES)}; {', '.join(OPT_IN_NAMES)} only "
        "when named)",
    )
    parser.add_argument(
        "--workdir", metavar="DIR", help="where archives and databases go (default: a temp dir)"
    )
    parser.set_defaults(handler=_run)
