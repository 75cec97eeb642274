"""A separate agent process on the shared S3 archive (run by test_s3_archive.py).

``python s3_worker.py write URL EPISODE SEED N`` stores N screenshots of its own plus one that every
writer shares, retains them under EPISODE and stores a record; prints the hashes as JSON.
``python s3_worker.py read URL HASH...`` reads each blob back (verified) and prints their sizes as JSON.
Credentials and the endpoint come from the standard AWS environment variables only.
"""

from __future__ import annotations

import io
import json
import sys


def png(seed: int, i: int) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (40, 30), ((seed * 53 + i * 7) % 256, (i * 31) % 256, seed % 256)).save(buf, "PNG")
    return buf.getvalue()


def main(argv: list[str]) -> int:
    from causalcache_memory.archive import open_archive

    mode, url = argv[0], argv[1]
    archive = open_archive(url)
    if mode == "write":
        episode, seed, n = argv[2], int(argv[3]), int(argv[4])
        hashes = [archive.put(png(seed, i)).sha256 for i in range(n)] + [archive.put(png(999, 0)).sha256]
        record = archive.put_record(json.dumps({"episode": episode, "hashes": hashes}).encode())
        archive.retain(episode, [*hashes, record])
        print(json.dumps({"hashes": hashes, "record": record}))
    else:
        print(json.dumps({sha: len(archive.get_bytes(sha)) for sha in argv[2:]}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
