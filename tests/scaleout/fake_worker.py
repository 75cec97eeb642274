"""A fake SGLang worker on a fixed loopback port, for the local topology of docs/DEPLOY.md (CPU only).

``python tests/scaleout/fake_worker.py --port 30001 [--lifetime 600]``: serves SGLang's ``/generate``,
``/health``, ``/server_info``, ``/model_info`` and ``/v1/models`` (tests/runtime/loopback.py) on
127.0.0.1 and stops by itself after ``--lifetime`` seconds.
"""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "runtime"))

from loopback import SGLangLoopback, _Handler, _Server


class PortWorker(SGLangLoopback):
    """:class:`SGLangLoopback` on a given port instead of an ephemeral one."""

    def __init__(self, port: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.port = port

    def start(self) -> PortWorker:
        self._server = _Server(("127.0.0.1", self.port), _Handler)
        self._server.app = self
        self._url = f"http://127.0.0.1:{self.port}"
        threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def record(self, path, payload, headers):  # a long-lived process keeps no request log
        pass


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--lifetime", type=float, default=600.0, help="seconds before it stops by itself")
    args = parser.parse_args()
    worker = PortWorker(args.port).start()
    print(f"fake SGLang worker on {worker.url} for {args.lifetime:g} s", flush=True)
    threading.Event().wait(args.lifetime)
    worker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
