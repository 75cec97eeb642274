"""Archive namespaces from ``configurable``: a tenant's thread never reads another tenant's blobs."""

from __future__ import annotations

import hashlib
import os
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from test_trace_policy import ImageCheckingModel, noisy_screen

from causalcache_memory.allocation import RecentAllocator
from causalcache_memory.archive import LocalArchive
from causalcache_memory.archive.namespaces import namespace_name
from causalcache_memory.config import parse_config
from causalcache_memory.errors import CausalCacheError, ConfigError
from causalcache_memory.integrations.langgraph import CausalCacheMemory, screenshot_ref


def _memory(root: str, keys: list[str]) -> CausalCacheMemory:
    config = parse_config(
        {
            "budget": 2,
            "archive": {"url": os.path.join(root, "archive"), "namespace_keys": keys},
            "checkpointer": {"kind": "memory"},
        }
    )
    return CausalCacheMemory(config=config, allocation=RecentAllocator())


def _agent(memory: CausalCacheMemory, model: ImageCheckingModel) -> Any:
    from langchain_core.tools import tool

    @tool
    def click(x: int, y: int) -> list:
        """Click at pixel (x, y); returns the new screen."""
        return memory.tool_screenshot(noisy_screen(x // 100 + 5), "clicked")

    return create_agent(
        model, tools=[click], middleware=[memory.middleware()], checkpointer=memory.checkpointer()
    )


def _cfg(tenant: str, thread: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "tenant_id": tenant}}


def test_a_tenant_never_reads_another_tenants_screenshot(tmp_path):
    memory = _memory(str(tmp_path), ["tenant_id"])
    secret = noisy_screen(9)  # tenant B's screen
    sha = hashlib.sha256(secret).hexdigest()
    b_model = ImageCheckingModel(steps=1)
    b_cfg = _cfg("tenant-b", "b-1")
    b_agent = _agent(memory, b_model)
    b_agent.invoke({"messages": [memory.screenshot_message(secret, "go", config=b_cfg)]}, b_cfg)
    assert b_model.images_seen[0] == [sha]  # B's own run sees its screen
    memory.flush_writes()

    # tenant A's run names B's screenshot by its hash: it is not in A's archive
    a_model = ImageCheckingModel(steps=1)
    a_cfg = _cfg("tenant-a", "a-1")
    forged = HumanMessage([{"type": "text", "text": "go"}, {"type": "text", "text": screenshot_ref(sha)}])
    with pytest.raises(CausalCacheError):
        _agent(memory, a_model).invoke({"messages": [forged]}, a_cfg)
    assert all(sha not in seen for seen in a_model.images_seen)  # the model never got B's pixels

    archive_root = tmp_path / "archive"
    stored = {p.name for p in archive_root.rglob("*") if p.is_file() and p.parent.parent.name == "blobs"}
    assert sha in stored
    assert sha in LocalArchive(archive_root / "tenants" / "tenant-b")
    assert not list((archive_root / "blobs").rglob("*.*")) and sha not in LocalArchive(archive_root)
    assert len(memory.trace(b_agent, b_cfg)) == 1  # read back through B's namespace


def test_the_same_thread_id_in_two_tenants_keeps_two_traces(tmp_path):
    memory = _memory(str(tmp_path), ["tenant_id"])
    for tenant, index in (("t1", 1), ("t2", 2)):
        cfg = _cfg(tenant, "shared-thread")
        model = ImageCheckingModel(steps=1)
        agent = _agent(memory, model)
        agent.invoke({"messages": [memory.screenshot_message(noisy_screen(index), "go", config=cfg)]}, cfg)
    memory.flush_writes()
    t1 = LocalArchive(tmp_path / "archive" / "tenants" / "t1")
    t2 = LocalArchive(tmp_path / "archive" / "tenants" / "t2")
    assert (
        hashlib.sha256(noisy_screen(1)).hexdigest() in t1
        and hashlib.sha256(noisy_screen(1)).hexdigest() not in t2
    )
    assert (
        hashlib.sha256(noisy_screen(2)).hexdigest() in t2
        and hashlib.sha256(noisy_screen(2)).hexdigest() not in t1
    )


def test_a_run_without_its_tenant_is_refused_naming_the_key(tmp_path):
    memory = _memory(str(tmp_path), ["tenant_id"])
    with pytest.raises(ConfigError, match="tenant_id"):
        memory.screenshot_message(noisy_screen(1), "go", config={"configurable": {"thread_id": "x"}})
    with pytest.raises(ConfigError, match="pass the run's config"):
        memory.screenshot_message(noisy_screen(1), "go")  # outside a run, no config: never a shared archive


def test_namespace_names_are_safe_and_injective():
    assert namespace_name(["acme"]) == "acme"
    unsafe = [namespace_name([v]) for v in ("../x", "a/b", "ns-acme", "Ä")]
    assert len(set(unsafe)) == 4 and all(n.startswith("ns-") and len(n) == 35 for n in unsafe)
    assert namespace_name(["a", "b"]).startswith("ns-")  # several keys: joined with '/', then hashed
    with pytest.raises(ConfigError):
        namespace_name([""])


def test_namespace_keys_are_validated():
    with pytest.raises(ConfigError, match="namespace_keys"):
        parse_config({"archive": {"namespace_keys": ["thread_id"]}})
