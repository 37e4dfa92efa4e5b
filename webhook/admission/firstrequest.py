"""A deadline for the header section of a new connection's first request (Go's
`ReadHeaderTimeout`).

gunicorn's gevent worker waits for every request's line and headers under the keep-alive
timeout (120 s, server.py), the idle bound of a kept-alive connection. A client that completes
its TLS handshake and then sends nothing, or trickles header bytes (slowloris), would hold its
connection that long. A new connection instead gets `HEADER_SECONDS` for the rest of its
handshake and its first request's line and headers, counted from the handshake's ClientHello:

- the TLS context's SNI callback, which OpenSSL calls on every handshake, with or without a
  server name (tls.py), hands the connection's socket to `FirstRequests.arm`, which starts a
  one-shot timer on the worker's event loop;
- the outermost WSGI app (`Arrivals`, which server.DragateServer puts in front of whatever
  app it serves), which runs once a request's line and headers are parsed, calls `disarm`
  for the connection's socket (`gunicorn.socket`, the same object);
- a timer that fires shuts the connection down (`shut_down`), so gunicorn's blocked read finds
  the connection's end and closes it quietly, as if the client had gone.

A timer is owned here until it fires or is disarmed; either drops it and the socket it holds.
A connection that closes first (a failed handshake, a refused request) is shut down at its
deadline all the same, which finds a closed socket and does nothing.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import Any

import gevent

HEADER_SECONDS = 10.0
"""How long a new connection has, from its TLS ClientHello, until its first request's line and
headers have arrived."""


def shut_down(sock: object) -> None:
    """End a connection served on `sock`: the TCP connection is shut down under the TLS layer
    (a duplicate of its descriptor), so the server's next read on it finds its end and a
    blocked write fails as a broken pipe, as if the client had gone. A socket already closed
    (or none) is left alone."""
    try:
        with socket.socket(fileno=os.dup(sock.fileno())) as raw:  # type: ignore[attr-defined]
            raw.shutdown(socket.SHUT_RDWR)
    except (AttributeError, OSError):
        pass


class FirstRequests:
    """The connections still waiting for their first request's headers, each with the timer
    that ends it at its deadline, keyed by `id` of the socket (held, so the id stays its own)."""

    def __init__(
        self, seconds: float = HEADER_SECONDS, end: Callable[[object], None] = shut_down
    ) -> None:
        self.seconds = seconds
        self._end = end
        self._armed: dict[int, tuple[object, Any]] = {}

    def __len__(self) -> int:
        return len(self._armed)

    def arm(self, sock: object) -> None:
        """Start the connection's deadline; a second handshake on it keeps the first one's."""
        if id(sock) in self._armed:
            return
        timer = gevent.get_hub().loop.timer(self.seconds)
        self._armed[id(sock)] = (sock, timer)
        timer.start(self._fire, sock)

    def disarm(self, sock: object) -> None:
        """The connection's first request arrived in time (or a later one: nothing is armed)."""
        entry = self._armed.pop(id(sock), None)
        if entry is not None:
            entry[1].close()

    def _fire(self, sock: object) -> None:
        entry = self._armed.pop(id(sock), None)
        if entry is not None:
            entry[1].close()
        self._end(sock)


PENDING = FirstRequests()
"""The worker's one owner: tls.py's handshake hook arms it (server.py), `Arrivals` disarms."""


class Arrivals:
    """WSGI middleware in front of the served app: a request has arrived, line and headers
    parsed, so its connection's first-request deadline is met."""

    def __init__(self, app: Any, first_requests: FirstRequests | None = None) -> None:
        self.app = app
        self.first_requests = first_requests or PENDING

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.first_requests.disarm(environ.get("gunicorn.socket"))
        return self.app(environ, start_response)
