"""/healthz, /readyz and /metrics of the controller process, over plain HTTP with the
standard library's threading server: kubelet probes and a Prometheus scrape, nothing else
(no review is ever sent here)."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Readiness = Callable[[], tuple[bool, dict[str, Any]]]
"""Whether the process is ready, and the body /readyz shows."""
Exposition = Callable[[], tuple[bytes, str]]
"""The /metrics body and its content type."""


@dataclass(frozen=True)
class Probes:
    readiness: Readiness
    metrics: Exposition


def bind(host: str, port: int, probes: Probes) -> ThreadingHTTPServer:
    """A bound server (port 0: any free one, see `server_address`); `serve` starts it."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/healthz":
                self._send(200, b'{"status": "ok"}', "application/json")
            elif path == "/readyz":
                ok, body = probes.readiness()
                self._send(200 if ok else 503, json.dumps(body).encode(), "application/json")
            elif path == "/metrics":
                self._send(200, *probes.metrics())
            else:
                self._send(404, b'{"status": "not found"}', "application/json")

        def _send(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            """Probes every few seconds are no news: not logged."""

    server_class = _Server6 if ":" in host else ThreadingHTTPServer
    server = server_class((host, port), Handler)
    server.daemon_threads = True
    return server


class _Server6(ThreadingHTTPServer):
    address_family = socket.AF_INET6


def serve(server: ThreadingHTTPServer) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name="probes", daemon=True)
    thread.start()
    return thread
