"""The "server is down" URL of the loopback helpers cannot be taken by another server (no port race)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import pytest
from loopback import free_port_url


def test_a_down_url_refuses_connections_and_its_port_stays_reserved() -> None:
    urls = {free_port_url() for _ in range(3)}
    assert len(urls) == 3
    for url in urls:
        port = urlsplit(url).port
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=2)
        with socket.socket() as other, pytest.raises(OSError, match="in use"):
            other.bind(("127.0.0.1", port))  # a server started meanwhile could not take it
