"""Is the bundled selector idle on the user-shaped 1920x1080 LangGraph agent, with and without screen text?

Runs tests/integrations/user_agent.py (pixel PyAutoGUI replies, 1920x1080 screens, B = 4, the bundled
selector) for ``--steps`` steps twice: once with screen text stored for every screenshot in the archive
(``put_text``, what the ``screen_text`` state key or the OCR extra store: here a mail client's
accessibility dump, one line per element, with invoice numbers on some screens), once without. Prints, per
run, the decisions that could swap (``t - 1 > B``), the share declined as out of distribution, the
pass-2 share, the swaps, the mask patterns the guard judged them under (``ood_masked``; ``none`` = every
feature group available), ``[min, median, max]`` of the threshold used and of the predicted gain of the
decisions the guard accepted (0 when the scorer declined), the decisions whose records say screen text
was missing (``masked``), and the warnings raised: idle (``warnings``) and missing screen text
(``text_warnings``), their messages.
``--min-gain`` sets the swap threshold (0 = the paper's rule) instead of the bundle's budget.

    python lab/tools/selector_user_agent_text.py --steps 40
    python lab/tools/selector_user_agent_text.py --steps 40 --min-gain 0
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import warnings
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "integrations"))

import user_agent as ua

from causalcache_memory.errors import CausalCacheWarning

_VENDORS = ("ACME Corp", "Globex", "Initech", "Umbrella Ltd", "Hooli")


def mail_text(index: int) -> str:
    """An accessibility dump of the mail client on screen ``index`` (folders, a message list, a message)."""
    lines = ["Mail", "09:41", "Inbox", "Archive", "Sent", "Drafts", "Search mail"]
    for k in range(4):
        n = (index * 4 + k) % 23
        if n % 3 == 0:
            lines.append(f"Invoice INV-{4100 + n} from {_VENDORS[n % len(_VENDORS)]}")
        else:
            lines.append(f"Meeting notes {n} from {_VENDORS[n % len(_VENDORS)]}")
    if index % 5 == 2:
        lines += [f"Invoice INV-{4100 + index}", f"Amount due: ${120 + index}.00", "Move to Archive"]
    return "\n".join(lines)


def _spread(values: list) -> list[float] | None:
    """``[min, median, max]`` of ``values`` (None when empty)."""
    if not values:
        return None
    v = sorted(float(x) for x in values)
    return [round(v[0], 4), round(v[len(v) // 2], 4), round(v[-1], 4)]


def run(steps: int, with_text: bool, min_gain: float | None = None) -> dict:
    with tempfile.TemporaryDirectory() as root:
        if with_text:  # stored before the run, as a screenshot node returning `screen_text` stores it
            from causalcache_memory.archive.local import LocalArchive

            archive = LocalArchive(str(Path(root) / "archive"))
            for i in range(steps + 1):
                sha = archive.put(ua.screen(i)).sha256
                archive.put_text(sha, mail_text(i))
        allocation = None
        if min_gain is not None:  # a frontier point (e.g. 0 = the paper's rule), the bundled scorer
            from causalcache_memory.selector.allocator import SelectorAllocator

            allocation = SelectorAllocator(min_gain=min_gain)
        memory = ua.memory_for(root, allocation=allocation)
        graph = ua.build_agent(memory, steps=steps, checkpointer=memory.checkpointer())
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            graph.invoke(ua.first_input(), ua.run_config("t1"))
        log = memory.episode_log(graph, ua.run_config("t1"))
    could = [r for r in log if r["t"] - 1 > r["budget"]]
    ours = [str(w.message) for w in caught if issubclass(w.category, CausalCacheWarning)]
    idle = [m for m in ours if "fell back" in m or "swapped on none" in m]
    no_text = [m for m in ours if m.startswith("screen text was missing")]
    return {
        "screen_text": with_text,
        "decisions": len(log),
        "could_swap": len(could),
        "ood_share": round(sum(r.get("fallback") == "ood" for r in could) / max(len(could), 1), 3),
        "pass2_share": round(sum(bool(r.get("second_pass")) for r in could) / max(len(could), 1), 3),
        "swaps": sum(r.get("k", 0) > 0 for r in could),
        "ood_masked": dict(Counter(r.get("ood_masked") or "none" for r in could if "ood_distance" in r)),
        "min_gain": _spread([r["min_gain"] for r in could if "min_gain" in r]),
        "predicted_gain": _spread([r["predicted_gain"] for r in could if r.get("fallback") is None]),
        "without_text": sum("text" in (r.get("masked") or "").split("+") for r in could),
        "warnings": idle,
        "text_warnings": no_text,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--min-gain", type=float, default=None, help="swap threshold (default: the bundle's)")
    args = parser.parse_args(argv)
    for with_text in (True, False):
        print(json.dumps(run(args.steps, with_text, args.min_gain)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
