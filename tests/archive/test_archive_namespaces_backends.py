"""Tenant sub-archives (``child``) on every backend: separate objects, references and gc."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from causalcache_memory.archive.cached import CachedArchive
from causalcache_memory.archive.namespaces import open_namespace
from causalcache_memory.errors import ConfigError


def _png(shade: int) -> bytes:
    buf = io.BytesIO()
    Image.new("RGB", (16, 12), (shade, 40, 90)).save(buf, format="PNG")
    return buf.getvalue()


def test_a_tenant_archive_is_an_archive_of_its_own(archive):
    a, b = open_namespace(archive, "acme"), open_namespace(archive, "globex")
    sha = a.put(_png(1)).sha256
    a.retain("thread-1", [sha])
    assert sha in a and sha not in b and sha not in archive
    assert a.url.rstrip("/").endswith("tenants/acme") and a.max_pixels == archive.max_pixels
    assert archive.live_episodes() == [] and b.live_episodes() == [] and a.live_episodes() == ["thread-1"]
    assert archive.gc(grace_seconds=0).deleted == 0 and b.gc(grace_seconds=0).deleted == 0
    assert a.get_bytes(sha) == _png(1)  # neither the parent's nor a sibling's gc reaches it
    a.release("thread-1")
    assert a.gc(grace_seconds=0).deleted == 1 and sha not in a


def test_a_cached_archive_namespaces_both_the_shared_store_and_its_cache(archive, tmp_path):
    cached = CachedArchive(archive, tmp_path / "cache")
    tenant = open_namespace(cached, "acme")
    sha = tenant.put(_png(2)).sha256
    assert sha in open_namespace(archive, "acme") and sha not in archive
    assert str(tenant.cache_dir).endswith("tenants/acme")


def test_an_archive_without_namespaces_is_refused_naming_the_fix(archive):
    with pytest.raises(ConfigError, match="namespace_keys"):
        open_namespace(object(), "acme")
    with pytest.raises(ConfigError, match="namespace_name"):
        open_namespace(archive, "../escape")
