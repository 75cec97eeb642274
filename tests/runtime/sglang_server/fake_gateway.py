"""A stand-in SGLang Model Gateway process for the launcher tests:
``python fake_gateway.py PORT WORKER_URL http|grpc``.

``http`` forwards each ``/generate`` body unchanged plus ``"model": "unknown"`` (smg 1.13 in HTTP mode);
``grpc`` rebuilds it from the fields a gRPC worker request has, dropping ``mm_processor_kwargs`` and
``rid`` (smg 1.13 in gRPC mode).
"""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

GRPC_FIELDS = ("text", "input_ids", "image_data", "sampling_params", "return_logprob", "logprob_start_len")


class Gateway(BaseHTTPRequestHandler):
    worker = ""
    mode = "http"

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.mode == "grpc":
            body = {k: v for k, v in body.items() if k in GRPC_FIELDS}
        else:
            body = {**body, "model": "unknown"}
        reply = httpx.post(self.worker + self.path, json=body, timeout=30)
        data = reply.content
        self.send_response(reply.status_code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    Gateway.worker, Gateway.mode = sys.argv[2].rstrip("/"), sys.argv[3]
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Gateway).serve_forever(poll_interval=0.05)
