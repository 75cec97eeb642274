"""Screen text on S3 (moto on loopback): another process's view reads it, gc deletes it with its blob."""

from __future__ import annotations

import pytest

from causalcache_memory.archive import FsspecArchive
from causalcache_memory.errors import BlobNotFoundError

ORDER = "Order #A-1042 · Desk Lamp"


@pytest.mark.parametrize("atomic", [True, False])
def test_s3_text_lives_and_dies_with_its_blob(s3, s3_url, make_png, atomic):
    archive = FsspecArchive(s3_url, atomic_put=atomic, **s3.options)
    kept = archive.put(make_png((1, 1, 1))).sha256
    dropped = archive.put(make_png((1, 1, 2))).sha256
    archive.put_text(kept, ORDER)
    archive.put_text(dropped, "gone soon")
    archive.put_text(kept, "second text")  # the first one stays
    other = FsspecArchive(s3_url, **s3.options)  # another process's view of the bucket
    assert other.get_text(kept) == ORDER and sorted(other.iter_texts()) == sorted([kept, dropped])
    archive.retain("ep-1", [kept])
    report = other.gc(grace_seconds=0)
    assert report.deleted == 1 and archive.get_text(dropped) is None and dropped not in archive
    assert archive.get_text(kept) == ORDER
    with pytest.raises(BlobNotFoundError, match="put the screenshot first"):
        archive.put_text(dropped, "again")
