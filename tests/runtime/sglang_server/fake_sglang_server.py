"""A stand-in SGLang server process for the launcher tests: ``python fake_sglang_server.py PORT plugin|stock``.

``plugin`` answers like a server running the causalcache plugin (roles key the cache and change history
tokens), ``stock`` like SGLang after a silently failed plugin import (roles ignored).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/runtime: loopback

from loopback import SGLangLoopback, _Handler, _Server

if __name__ == "__main__":
    app = SGLangLoopback(lifetime_s=120.0)
    app.role_aware = sys.argv[2] == "plugin"
    server = _Server(("127.0.0.1", int(sys.argv[1])), _Handler)
    server.app = app
    server.serve_forever(poll_interval=0.05)
