"""Loopback helpers shared by the tests that start a real `dragate serve`."""

from __future__ import annotations

import http.client
import socket
import ssl
from pathlib import Path

from cryptography import x509


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def serving_serial(port: int, trust: Path, path: str = "/healthz") -> tuple[int, int]:
    """(HTTP status of GET `path`, serial of the serving certificate) on a new TLS connection."""
    context = ssl.create_default_context(cafile=str(trust))
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=context, timeout=10)
    try:
        conn.request("GET", path)
        status = conn.getresponse().status
        sock = conn.sock
        assert isinstance(sock, ssl.SSLSocket)
        der = sock.getpeercert(binary_form=True)
        assert der is not None
        return status, x509.load_der_x509_certificate(der).serial_number
    finally:
        conn.close()
