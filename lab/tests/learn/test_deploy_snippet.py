"""Issue 56, finding 7: ``deploy.yaml`` quoted the model path with Python's ``repr``, so a backslash or a
tab changed the path and a name with both quote kinds made unparsable YAML."""

from __future__ import annotations

import pytest
import yaml

from causalcache_lab.learn.deploy import deploy_snippet


@pytest.mark.parametrize(
    "name",
    ["plain", "tab\there", "back\\slash", "it's", 'say "hi"', "both ' and \"", "ünïcödé", "a: b # c"],
)
def test_the_model_path_reads_back_as_itself(tmp_path, name):
    model_dir = tmp_path / name
    snippet = deploy_snippet(model_dir, budget=4, min_gain=0.25)
    config = yaml.safe_load(snippet)
    assert config["allocation"]["selector"]["model_path"] == str(model_dir.resolve())
    assert config["allocation"]["selector"]["min_gain"] == 0.25 and config["budget"] == 4
    assert yaml.safe_load(deploy_snippet(model_dir, budget=2))["allocation"]["selector"]["min_gain"] == "auto"


def test_a_learned_guard_is_deployed_as_fitted_with_the_witness_check(tmp_path):
    """The learned guard was fitted on the team's own states: no online refit re-centres it (RESULTS C7),
    and the merged snippet is a valid memory config with those keys."""
    from causalcache_memory.config import parse_config

    config = yaml.safe_load(deploy_snippet(tmp_path / "model", budget=4, min_gain=0.25))
    selector = config["allocation"]["selector"]
    assert (selector["ood_refit"], selector["ood_refit_warmup"], selector["witness_check"]) == (
        None,
        "bundled",
        True,
    )
    parsed = parse_config(
        {**config, "allocation": {**config["allocation"], "selector": {**selector, "model_path": None}}}
    )
    assert parsed.allocation.selector.ood_refit is None and parsed.allocation.selector.witness_check is True
