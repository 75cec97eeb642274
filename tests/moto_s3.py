"""S3 on loopback for tests: moto's server mode in a thread of this process (:class:`MotoS3`), or in a
process of its own that a test can freeze with SIGSTOP (:class:`MotoS3Process`). Everything binds
127.0.0.1; credentials are dummies passed through the standard AWS variables."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["MotoS3", "MotoS3Process", "free_port"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class MotoS3:
    """moto's S3 server on 127.0.0.1 (a thread of this process) with one bucket.

    ``env`` holds the standard AWS variables (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_DEFAULT_REGION``, ``AWS_ENDPOINT_URL``) that boto3/s3fs read, for this process and subprocesses.
    """

    def __init__(self, bucket: str = "causalcache") -> None:
        self.bucket = bucket
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.env = {
            "AWS_ACCESS_KEY_ID": "loopback",
            "AWS_SECRET_ACCESS_KEY": "loopback-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": self.endpoint,
        }
        self._server = None

    @property
    def options(self) -> dict[str, object]:
        """s3fs storage options naming this server explicitly (a filesystem instance of its own)."""
        return {
            "endpoint_url": self.endpoint,
            "key": self.env["AWS_ACCESS_KEY_ID"],
            "secret": self.env["AWS_SECRET_ACCESS_KEY"],
            "client_kwargs": {"region_name": self.env["AWS_DEFAULT_REGION"]},
        }

    def client(self) -> Any:
        """A boto3 client of this server: another process's view of the bucket, with no fsspec cache."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=self.env["AWS_SECRET_ACCESS_KEY"],
            region_name=self.env["AWS_DEFAULT_REGION"],
        )

    def start(self) -> MotoS3:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=self.port, verbose=False)
        self._server.start()
        self.client().create_bucket(Bucket=self.bucket)
        return self

    @contextlib.contextmanager
    def environ(self) -> Iterator[None]:
        old = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)
        try:
            yield
        finally:
            for k, v in old.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def __enter__(self) -> MotoS3:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class MotoS3Process(MotoS3):
    """moto's S3 server as a child process (``freeze()`` sends SIGSTOP, ``stop()`` kills it)."""

    def start(self, timeout_s: float = 30.0) -> MotoS3Process:
        code = "import sys; from moto.server import main; main(sys.argv[1:])"
        cmd = [sys.executable, "-c", code, "-H", "127.0.0.1", "-p", str(self.port)]
        self._proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    self.stop()
                    raise RuntimeError(f"moto server did not listen on port {self.port}") from None
                time.sleep(0.05)
        self.client().create_bucket(Bucket=self.bucket)
        return self

    def freeze(self) -> None:
        self._proc.send_signal(signal.SIGSTOP)

    def stop(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
            proc.wait(10)
        self._proc = None
