"""The YAML snippet that deploys a trained selector with ``CausalCacheMemory``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["LEARNED_GUARD", "deploy_snippet", "yaml_string"]

#: how a learned model's guard is deployed: it was fitted on this team's own recorded states, so it
#: judges from the first decision and is not refitted online (the default refit re-centres it on 64
#: decisions and cost the desktop walkthrough its gain over the bundle: RESULTS.md C7), with the
#: witness-source check on as in the defaults
LEARNED_GUARD: dict[str, object] = {"ood_refit": None, "ood_refit_warmup": "bundled", "witness_check": True}


def yaml_string(text: str) -> str:
    """``text`` as one YAML double-quoted scalar (YAML's own escapes: a backslash, tab, quote of either
    kind or line break reads back as itself; Python's ``repr`` does not: ``\\t`` and ``'it\\'s'``)."""
    import yaml

    dumped = yaml.safe_dump(text, default_style='"', allow_unicode=True, width=float("inf"))
    return dumped.removesuffix("\n...\n").strip()


def deploy_snippet(model_dir: str | Path, *, budget: int, min_gain: float | str = "auto") -> str:
    """A config fragment (``budget`` + ``allocation``) naming ``model_dir`` (absolute path).

    Merge it into the agent's memory config; ``min_gain: auto`` reads the threshold calibrated on dev and
    stored with the model; the guard keys are :data:`LEARNED_GUARD`. ``causalcache config validate``
    checks the merged file. A commented
    ``allocation.compare`` block runs the bundled selector on half of the episodes, to compare the two.
    """
    path = Path(model_dir).resolve()
    gain = yaml_string(min_gain) if isinstance(min_gain, str) else repr(float(min_gain))
    return (
        "# causalcache learn: deploy the selector trained on your own trajectories\n"
        f"budget: {int(budget)}\n"
        "two_pass: true\n"
        "allocation:\n"
        "  allocator: selector\n"
        "  selector:\n"
        f"    model_path: {yaml_string(str(path))}\n"
        f"    min_gain: {gain}\n"
        "    # the guard was fitted on your own recorded states: it judges from the first decision, no\n"
        "    # online refit (docs/LEARN.md), with the witness-source check of the defaults\n"
        + "".join(f"    {key}: {_yaml_value(value)}\n" for key, value in LEARNED_GUARD.items())
        + "  # to compare it with the bundled selector on live episodes before switching for good, uncomment\n"
        "  # and run `causalcache compare` on the recorded threads (docs/LEARN.md, 'Compare before switching'):\n"
        "  # compare: {share: 0.5, model_path: null}\n"
    )


def _yaml_value(value: object) -> str:
    import yaml

    return str(yaml.safe_dump(value, default_flow_style=True)).removesuffix("\n...\n").strip()
