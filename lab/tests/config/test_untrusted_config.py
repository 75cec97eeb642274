"""Issue 56, findings 2, 3 and 9: a config file runs only trusted code, never prints another file, and its
size is bounded before parsing costs anything.

* ``learn.yaml`` and selector recipes named any importable callable (``subprocess:run`` created a file);
  now a factory must be in the project's modules or one the user trusts (``--trust-module``,
  ``CAUSALCACHE_TRUSTED_MODULES``), checked when the file loads, before anything is imported or called.
* A config path that was a link to a secrets file printed its lines as "unknown key"; now a link out of
  the config's folder is refused unread, and a file sharing no key with the config has no key shown.
* A 1 MiB plain scalar cost seconds of pure-Python scanning before it was refused.
"""

from __future__ import annotations

import json
import sys

import pytest

from causalcache_lab.learn import load_learn_config
from causalcache_lab.selector.recipe import load_recipe, resolve
from causalcache_memory.config import load_config
from causalcache_memory.config.loader import MAX_SCALAR_CHARS, read_yaml_bytes
from causalcache_memory.config.trusted import resolve_factory, trusted_modules
from causalcache_memory.errors import ConfigError

RUN = {"factory": "subprocess:run", "kwargs": {"args": ["touch", "PLACEHOLDER"]}}


def _learn_yaml(tmp_path, labeller) -> str:
    path = tmp_path / "learn.yaml"
    data = {"data": {"dataset": str(tmp_path / "data")}, "labeller": labeller}
    path.write_text(json.dumps(data))
    return str(path)


def test_a_learn_config_naming_subprocess_run_is_refused_before_anything_runs(tmp_path):
    marker = tmp_path / "ran"
    labeller = {**RUN, "kwargs": {"args": ["touch", str(marker)]}}
    sys.modules.pop("subprocess_never_imported", None)
    with pytest.raises(ConfigError) as info:
        load_learn_config(_learn_yaml(tmp_path, labeller))
    message = str(info.value)
    assert "labeller.factory='subprocess:run'" in message  # the field and the value
    assert "--trust-module subprocess" in message and "CAUSALCACHE_TRUSTED_MODULES" in message  # the fix
    assert not marker.exists()


@pytest.mark.parametrize("section", ["setup", "policy", "data", "archive"])
def test_a_recipe_naming_an_outside_module_is_refused_when_loaded(tmp_path, section):
    marker = tmp_path / "ran"
    path = tmp_path / "recipe.yaml"
    path.write_text(json.dumps({section: {**RUN, "kwargs": {"args": ["touch", str(marker)]}}}))
    with pytest.raises(ConfigError, match=rf"{section}\.factory='subprocess:run'.*--trust-module"):
        load_recipe(path)
    assert not marker.exists()


def test_the_user_can_trust_a_module_explicitly(tmp_path, monkeypatch):
    path = tmp_path / "recipe.yaml"
    path.write_text(json.dumps({"policy": {"factory": "json:dumps", "kwargs": {"obj": 1}}}))
    with pytest.raises(ConfigError):
        load_recipe(path)
    assert load_recipe(path, trusted=["json"]).policy.factory == "json:dumps"
    monkeypatch.setenv("CAUSALCACHE_TRUSTED_MODULES", "json")
    assert load_recipe(path).policy is not None


@pytest.mark.parametrize(
    "factory",
    [
        "causalcache_memory.trace.owner:json.dumps",  # through a module object
        "causalcache_memory.config.loader:contextlib.suppress",
        "causalcache_memory.trace.owner:_owner_is_dead",  # private
        "causalcache_lab.selector.recipe:Path",  # defined in pathlib, re-exported
    ],
)
def test_a_project_module_cannot_be_used_to_reach_other_code(factory):
    with pytest.raises(ConfigError, match=r"policy\.factory"):
        resolve_factory("policy.factory", factory, trusted_modules())


def test_every_factory_of_a_recipe_is_checked_before_the_first_is_called(tmp_path, monkeypatch):
    calls = []

    def world_setup(**kwargs):
        calls.append(kwargs)

    world_setup.__module__ = "causalcache_lab.selector.recipe"  # stands in for the project's own
    monkeypatch.setattr("causalcache_lab.selector.recipe.world_setup", world_setup)
    path = tmp_path / "recipe.yaml"
    path.write_text(
        json.dumps(
            {
                "setup": {"factory": "causalcache_lab.selector.recipe:world_setup"},
                "policy": {"factory": "causalcache_memory.trace.owner:json.dumps"},
            }
        )
    )
    with pytest.raises(ConfigError, match=r"policy\.factory"):
        resolve(load_recipe(path))
    assert calls == []


SECRETS = {
    "yaml-like": "DB_PASSWORD: hunter2-zz91\nAPI_TOKEN: tok-5f3e1a9b77c2\nadmin_email: root@example.org\n",
    "dotenv": "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG\nDB_PASSWORD=hunter2-zz91\n",
    "ini": "[default]\naws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI\n",
    "pem": "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmU\n-----END OPENSSH PRIVATE KEY-----\n",
}


def _lines(text: str) -> list[str]:
    out = []
    for line in text.splitlines():
        out.append(line.strip())
        out.extend(p.strip() for p in line.replace("=", ":").split(":") if len(p.strip()) >= 6)
    return [x for x in out if x]


@pytest.mark.parametrize("kind", sorted(SECRETS))
@pytest.mark.parametrize("loader", ["config", "learn", "recipe"])
def test_pointing_a_loader_at_another_file_prints_no_line_of_it(tmp_path, kind, loader):
    secrets = tmp_path / "secrets"
    secrets.write_text(SECRETS[kind])
    load = {"config": load_config, "learn": load_learn_config, "recipe": load_recipe}[loader]
    with pytest.raises(ConfigError) as info:
        load(secrets)
    for piece in _lines(SECRETS[kind]):
        assert piece not in str(info.value), piece


def test_a_link_out_of_the_config_folder_is_refused_unread(tmp_path):
    outside = tmp_path / "home" / ".aws"
    outside.mkdir(parents=True)
    (outside / "credentials").write_text(SECRETS["yaml-like"])
    configs = tmp_path / "project"
    configs.mkdir()
    link = configs / "causalcache.yaml"
    link.symlink_to(outside / "credentials")
    with pytest.raises(ConfigError, match="symbolic link to a file outside its folder") as info:
        load_config(link)
    assert "hunter2" not in str(info.value) and "DB_PASSWORD" not in str(info.value)
    (configs / "real.yaml").write_text("{}\n")
    (configs / "alias.yaml").symlink_to(configs / "real.yaml")  # a link inside the folder is fine
    assert load_config(configs / "alias.yaml") is not None
    with pytest.raises(ConfigError, match="none of its 3 top-level keys"):
        load_config(link, follow_links=True)  # followed on purpose: still no key shown


def test_unknown_keys_are_capped_and_cut(tmp_path):
    path = tmp_path / "c.yaml"
    keys = "\n".join(f"k{i}_{'x' * 100}: 1" for i in range(30))
    path.write_text(f"archive: {{}}\n{keys}\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "and 25 more unknown keys" in message and "x" * 50 not in message


def test_a_huge_plain_scalar_is_refused_on_the_token_stream():
    text = "key: " + "\n  ".join(f"word{i} abc def" for i in range(MAX_SCALAR_CHARS // 8))
    with pytest.raises(ConfigError, match="MAX_SCALAR_CHARS"):
        read_yaml_bytes(text.encode(), source="big.yaml")
