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
