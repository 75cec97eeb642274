"""Guard try 2 (docs/notebook/results/guard_rule_try2.md) on real screen-text formats: the real-format replay
fixtures and the README's 1080p agent with a 24-line accessibility dump.

For each of three selector settings, ``bundled`` (the guard before try 2, the default until 2026-12-07), ``try1`` (``ood_refit: 64``) and
``try2`` (``witness_check``, ``ood_refit: 64``, ``ood_refit_warmup: open``):

* **fixtures** (lab/tests/fixtures/real_formats, replayed as ``lab/tests/eval/test_real_format_replay.py``
  does, normaliser on): could-swap decisions, the share declined (OOD fallbacks plus witness refusals
  whose re-search kept Recent-B), the evidence restored at the use step of the memory tasks, and the
  share of control decisions without a swap. ``--deployment trajectory`` gives every trajectory its own
  allocator (as the test does); ``source`` shares one across a source's trajectories.
* **dump** (``lab/tools/selector_dump_formats.py``'s 24-line ``dump`` format, ``--steps`` steps): the
  could-swap decisions, the share declined, the swaps.

    python lab/tools/guard_try2_formats.py --steps 40
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "lab" / "tests" / "eval"))
sys.path.insert(0, str(ROOT / "lab" / "tools"))

import selector_dump_formats as dumps  # noqa: E402
import test_real_format_replay as replay  # noqa: E402

from causalcache_memory.selector.allocator import SelectorAllocator  # noqa: E402

SETTINGS = {
    "bundled": {"ood_refit": None, "ood_refit_warmup": "bundled", "witness_check": False},
    "try1": {"ood_refit": 64, "ood_refit_warmup": "bundled", "witness_check": False},
    "try2": {"ood_refit": 64, "ood_refit_warmup": "open", "witness_check": True},  # the defaults now
}


def _declined(r: dict) -> bool:
    return r.get("fallback") == "ood" or ("witness_kept" in r and int(r.get("k", 0)) == 0)


def fixtures(setting: str, deployment: str) -> dict:
    kwargs = SETTINGS[setting]
    shared: dict[str, SelectorAllocator] = {}

    def make(*, screen_text=None):
        if deployment == "trajectory":
            return SelectorAllocator(screen_text=screen_text, **kwargs)
        allocator = shared.setdefault("one", SelectorAllocator(screen_text=screen_text, **kwargs))
        allocator.use_screen_text(screen_text)
        return allocator

    rows = []
    saved = replay.SelectorAllocator
    replay.SelectorAllocator = make  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as root, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for source in replay.SOURCES:
                shared.clear()
                rows += replay.run_source(source, Path(root), True)
    finally:
        replay.SelectorAllocator = saved
    out = replay.summarize(rows)
    return {"setting": setting, "deployment": deployment, **out}


def dump(setting: str, steps: int) -> dict:
    import user_agent as ua

    from causalcache_memory.archive.local import LocalArchive

    with tempfile.TemporaryDirectory() as root:
        archive = LocalArchive(str(Path(root) / "archive"))
        for i in range(steps + 1):
            archive.put_text(archive.put(ua.screen(i)).sha256, dumps.dump_text(i))
        memory = ua.memory_for(root, allocation=SelectorAllocator(**SETTINGS[setting]))
        graph = ua.build_agent(memory, steps=steps, checkpointer=memory.checkpointer())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph.invoke(ua.first_input(), ua.run_config("t1"))
        log = memory.episode_log(graph, ua.run_config("t1"))
    could = [r for r in log if r["t"] - 1 > r["budget"]]
    return {
        "setting": setting,
        "steps": steps,
        "could_swap": len(could),
        "declined": sum(_declined(r) for r in could),
        "declined_share": round(sum(_declined(r) for r in could) / max(len(could), 1), 3),
        "witness_refused": sum("witness_kept" in r for r in could),
        "after_refit": sum(r.get("ood_refit") == "refit" for r in could),
        "swaps": sum(int(r.get("k", 0)) > 0 for r in could),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--settings", default="bundled,try1,try2")
    args = parser.parse_args(argv)
    for setting in args.settings.split(","):
        for deployment in ("trajectory", "source"):
            print(json.dumps({"fixtures": fixtures(setting, deployment)}), flush=True)
        print(json.dumps({"dump": dump(setting, args.steps)}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
